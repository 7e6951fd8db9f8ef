"""Peak memory of line queries over a 200 MB file-backed artifact.

Run: ``python -m bench.artifact_memory [--mb 200]``. Writes the body with
`FileSpoolStore.write_chunks` (streamed, never a 200 MB string), then runs ``head``, ``tail``,
``grep``, ``line_count``, ``cat`` of a range in the middle and ``estimate_tokens``. Each query
runs cold under ``tracemalloc`` (its peak Python allocations, building the line index included),
then a second, warm run is timed alone. The process's peak RSS (``resource.getrusage``) is
checked too. Fails if any query's peak, or the RSS growth over all queries, reaches 64 MB.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

from pipeline.artifacts import SpooledArtifact
from pipeline.stores import FileSpoolStore

LIMIT_MB = 64.0
NEEDLE_EVERY = 400_000


def chunks(target_bytes: int) -> Iterator[str]:
    """Yield ~1 MB chunks of log-like lines until ``target_bytes``, a needle now and then."""
    written = 0
    line_no = 0
    while written < target_bytes:
        lines = []
        for _ in range(16_000):
            if line_no % NEEDLE_EVERY == 0:
                lines.append(f"{line_no:09d} ERROR needle found in shard {line_no // 1000}\n")
            else:
                lines.append(
                    f"{line_no:09d} INFO service=api latency_ms={line_no % 997} "
                    f"path=/v1/items/{line_no % 5000}\n"
                )
            line_no += 1
        chunk = "".join(lines)
        written += len(chunk)
        yield chunk


def rss_mb() -> float:
    """Return the peak resident set size so far, in MB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def measure(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run ``run`` cold under tracemalloc (peak MB, caches built here), then time it alone."""
    tracemalloc.start()
    try:
        run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    started = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - started
    return result, seconds, peak / (1024 * 1024)


def main(argv: list[str] | None = None) -> int:
    """Write the artifact, run the queries, print the table and check the limit."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=200, help="artifact size in MB")
    options = parser.parse_args(argv)
    target = options.mb * 1024 * 1024

    with tempfile.TemporaryDirectory(prefix="loopware-bench-") as directory:
        store = FileSpoolStore(directory)
        started = time.perf_counter()
        reader = store.write_chunks("bench", chunks(target))
        write_seconds = time.perf_counter() - started
        artifact = SpooledArtifact(reader)
        size_mb = artifact.byte_length() / (1024 * 1024)
        print(f"wrote {size_mb:.1f} MB in {write_seconds:.2f} s (streamed)")

        baseline_rss = rss_mb()
        queries: list[tuple[str, Callable[[], Any], Callable[[Any], str]]] = [
            ("head(10)", lambda: artifact.head(10), lambda r: f"{len(r)} lines"),
            ("tail(10)", lambda: artifact.tail(10), lambda r: f"{len(r)} lines"),
            ("line_count()", artifact.line_count, lambda r: f"{r:,} lines"),
            ("grep('ERROR needle')", lambda: artifact.grep("ERROR needle"),
             lambda r: f"{len(r)} matches"),
            ("cat(middle, +10)",
             lambda: artifact.cat(artifact.line_count() // 2, artifact.line_count() // 2 + 10),
             lambda r: f"{len(r)} lines"),
            ("estimate_tokens()", artifact.estimate_tokens, lambda r: f"~{r:,} tokens"),
        ]
        rows = []
        for name, run, describe in queries:
            result, seconds, peak = measure(run)
            rows.append((name, seconds, peak, describe(result)))
        rss_growth = rss_mb() - baseline_rss

    print(f"{'query':<22} {'warm s':>8} {'peak MB':>8}  result")
    print("-" * 60)
    for name, seconds, peak, summary in rows:
        print(f"{name:<22} {seconds:>8.3f} {peak:>8.2f}  {summary}")
    print("-" * 60)
    print(f"peak RSS growth during the queries: {rss_growth:.1f} MB "
          f"(baseline {baseline_rss:.1f} MB)")

    worst = max(peak for _, _, peak, _ in rows)
    assert worst < LIMIT_MB, f"a query peaked at {worst:.1f} MB (limit {LIMIT_MB} MB)"
    assert rss_growth < LIMIT_MB, f"RSS grew by {rss_growth:.1f} MB (limit {LIMIT_MB} MB)"
    print(f"OK: every query stayed under {LIMIT_MB:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
