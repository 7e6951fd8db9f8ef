"""Grep over a large file-backed artifact: `SpooledArtifact.grep`, stdlib ``re``, ``grep -c``.

Run::

    python -m bench.grep              # a 200 MB body, best of 3
    python -m bench.grep --quick      # 20 MB, one run (smoke test)

The body (log-like lines, a needle every 400,000 lines) is written with
`FileSpoolStore.write_chunks`. For each ordinary pattern it times, on the same file:

- ``grep -cE`` (GNU grep, the floor: C, no Python objects);
- stdlib ``re``: the same streamed line batches searched with ``re.compile(p).search`` in
  ``map``/``compress`` (what grep could do if it trusted every pattern);
- `SpooledArtifact.grep`: ``re`` where the pattern's backtracking is bounded, the time-limited
  ``regex`` module otherwise (see ``pipeline/artifacts/_grep.py``);
- the ``regex`` path alone (every line through the time-limited ``regex`` module, as grep ran
  before it had two engines), for reference.

Every engine must find the same number of lines. Then a pathological pattern, ``(a|aa)+$``
over lines of ``a``s, must stop with an error at its deadline. Target: grep within 2x
of ``re`` on ordinary patterns.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from itertools import compress
from time import monotonic
from typing import Any

import pipeline.artifacts._grep as grep_module
from pipeline.artifacts import SpooledArtifact
from pipeline.errors import InvalidToolArgsError
from pipeline.stores import FileSpoolStore

from .artifact_memory import chunks

PATTERNS = [
    ("literal", "ERROR needle", "ERROR needle"),
    ("class", r"latency_ms=99\d ", "latency_ms=99[0-9] "),
    ("anchored", r"items/4\d+$", "items/4[0-9]+$"),
    ("two wildcards", r"INFO.*api.*=49\d\b", "INFO.*api.*=49[0-9]\\b"),
]


def best(run: Callable[[], int], repeats: int) -> tuple[float, int]:
    """Return the best wall time of ``repeats`` runs and the run's count."""
    times: list[float] = []
    count = 0
    for _ in range(repeats):
        started = time.perf_counter()
        count = run()
        times.append(time.perf_counter() - started)
    return min(times), count


def gnu_count(grep: str, ere: str, path: str) -> int:
    """Lines GNU grep counts for the extended regular expression ``ere`` in ``path``."""
    found = subprocess.run([grep, "-cE", ere, path], capture_output=True, text=True, check=False)
    return int(found.stdout or 0)


def grep_count(artifact: SpooledArtifact, pattern: str) -> int:
    """Lines the artifact's own ``grep`` finds for ``pattern``."""
    return len(artifact.grep(pattern))


def stdlib_count(reader: Any, pattern: str) -> int:
    """Count matching lines with stdlib ``re`` over the reader's streamed batches."""
    search = re.compile(pattern).search
    batches = reader.iter_line_batches()
    return sum(len(list(compress(batch, map(search, batch)))) for batch in batches)


def regex_only_count(reader: Any, pattern: str, budget: float) -> int:
    """Count matching lines with the time-limited ``regex`` path alone (the old grep)."""
    compiled = grep_module.compile_grep(pattern)
    slow = grep_module.GrepPattern(pattern, compiled.slow, None, None, None)
    batches: Iterator[list[str]] = reader.iter_line_batches()
    deadline = monotonic() + budget
    return sum(1 for _ in grep_module.iter_matches(slow, batches, deadline=deadline))


def main(argv: list[str] | None = None) -> int:
    """Write the body, time every engine on every pattern, check the pathological case."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=None, help="body size in MB (default 200)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per engine (best kept)")
    parser.add_argument("--quick", action="store_true", help="20 MB, one run (smoke test)")
    parser.add_argument("--no-regex-only", action="store_true", help="skip the slow reference")
    options = parser.parse_args(argv)
    size_mb = options.mb or (20 if options.quick else 200)
    repeats = options.repeats or (1 if options.quick else 3)
    gnu_grep = shutil.which("grep")

    with tempfile.TemporaryDirectory(prefix="loopware-grep-") as directory:
        store = FileSpoolStore(directory)
        reader = store.write_chunks("bench", chunks(size_mb * 1024 * 1024))
        artifact = SpooledArtifact(reader)
        print(f"body: {artifact.byte_length() / 1e6:.1f} MB, {artifact.line_count():,} lines "
              f"(best of {repeats})")
        header = f"{'pattern':<15} {'grep -c':>8} {'re':>8} {'grep()':>8} {'x re':>6}"
        print(header + ("" if options.no_regex_only else f" {'regex only':>11}") + "  matches")
        print("-" * (len(header) + 22))
        ratios: list[float] = []
        for name, pattern, ere in PATTERNS:
            floor = "-"
            if gnu_grep is not None:
                path = str(reader.path)
                seconds, _ = best(partial(gnu_count, gnu_grep, ere, path), repeats)
                floor = f"{seconds:.3f}"
            re_s, re_n = best(partial(stdlib_count, reader, pattern), repeats)
            ours_s, ours_n = best(partial(grep_count, artifact, pattern), repeats)
            assert ours_n == re_n, f"{name}: grep found {ours_n} lines, re {re_n}"
            ratio = ours_s / re_s
            ratios.append(ratio)
            row = f"{name:<15} {floor:>8} {re_s:>8.3f} {ours_s:>8.3f} {ratio:>6.2f}"
            if not options.no_regex_only:
                budget = artifact.grep_time_limit()
                slow_s, slow_n = best(partial(regex_only_count, reader, pattern, budget), 1)
                assert slow_n == re_n, f"{name}: the regex path found {slow_n}, re {re_n}"
                row += f" {slow_s:>11.3f}"
            print(f"{row}  {re_n:,}")

    # A pathological pattern must stop with an error at its deadline, not run for ages.
    with tempfile.TemporaryDirectory(prefix="loopware-grep-") as directory:
        hopeless = FileSpoolStore(directory).write("h", ("a" * 28 + "!\n") * 20_000)
        evil = SpooledArtifact(hopeless)
        started = time.perf_counter()
        try:
            evil.grep(r"(a|aa)+$")
        except InvalidToolArgsError as exc:
            seconds = time.perf_counter() - started
            print(f"pathological (a|aa)+$: stopped with {exc.code} after {seconds:.2f} s "
                  f"(budget {evil.grep_time_limit():.2f} s)")
        else:
            print("FAIL: the pathological pattern was not stopped")
            return 1
    worst = max(ratios)
    verdict = "OK" if worst <= 2.0 else "ABOVE TARGET"
    print(f"{verdict}: grep() took at most {worst:.2f}x the time of stdlib re (target: 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
