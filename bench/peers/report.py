"""Format the peer benchmark's results as one table.

Usage: ``python report.py RESULTS_DIR``. The directory holds ``floor.json``, one ``<name>.json``
line per framework that ran, and ``<name>.skip`` (the reason) per framework that did not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ORDER = ("loopware", "langchain", "pydantic_ai", "openai_agents", "google_adk")
HEADERS = (
    "framework",
    "version",
    "overhead µs/iter, 0 layers",
    "overhead µs/iter, 5 layers",
    "x floor, 0 layers",
    "x floor, 5 layers",
)


def spread(samples: list[float]) -> str:
    """Return the min-max range of the repeats, for judging noise."""
    return f"{min(samples):.0f}-{max(samples):.0f}"


def main(results: Path) -> None:
    floor = json.loads((results / "floor.json").read_text())
    floor_us = floor["median_us"]
    rows: list[tuple[str, ...]] = []
    skipped: list[tuple[str, str]] = []
    notes: list[str] = []
    for name in ORDER:
        result_file = results / f"{name}.json"
        skip_file = results / f"{name}.skip"
        if result_file.exists():
            data = json.loads(result_file.read_text().strip().splitlines()[-1])
            over = {k: data["median_us"][k] - floor_us for k in ("0", "5")}
            rows.append(
                (
                    data["framework"],
                    data["version"],
                    f"{over['0']:,.1f}",
                    f"{over['5']:,.1f}",
                    f"{over['0'] / floor_us:,.0f}",
                    f"{over['5'] / floor_us:,.0f}",
                )
            )
            notes.append(
                f"  {data['framework']}: {data['notes']}; repeats µs/iter "
                f"0 layers {spread(data['per_iteration_us']['0'])}, "
                f"5 layers {spread(data['per_iteration_us']['5'])}"
            )
        elif skip_file.exists():
            skipped.append((name, skip_file.read_text().strip()))
    widths = [max(len(r[i]) for r in (HEADERS, *rows)) for i in range(len(HEADERS))]
    line = "  ".join("-" * w for w in widths)
    print(
        f"Per-iteration framework overhead: one turn of 20 echo-tool iterations, fake models, "
        f"median of the repeats minus the floor ({floor_us:.3f} µs/iteration: a plain Python "
        f"loop of the same echo calls, Python {floor['python']})."
    )
    print(line)
    for i, row in enumerate((HEADERS, *rows)):
        cells = [
            cell.ljust(widths[j]) if j < 2 else cell.rjust(widths[j]) for j, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip())
        if i == 0:
            print(line)
    for name, reason in skipped:
        print(f"{name.ljust(widths[0])}  skipped: {reason}")
    print(line)
    if notes:
        print("How each ran (and the spread of its repeats, before subtracting the floor):")
        print("\n".join(notes))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
