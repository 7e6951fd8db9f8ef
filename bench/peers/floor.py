"""The floor: a plain Python loop doing only the scenario's tool calls (no framework, no model).

Prints one JSON line with µs per iteration (median of repeats). Many more turns are timed than
for the frameworks because one floor turn takes about a microsecond.
"""

from __future__ import annotations

import json
import platform
import statistics
import time

from _scenario import ARGS, ITERATIONS, REPEATS, echo

FLOOR_TURNS = 100_000


def turn() -> None:
    """One turn's worth of tool calls, as plain function calls."""
    for k in range(ITERATIONS):
        echo(**ARGS[k % 3])


def main() -> None:
    for _ in range(1000):
        turn()
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(FLOOR_TURNS):
            turn()
        samples.append((time.perf_counter() - start) / (FLOOR_TURNS * ITERATIONS) * 1e6)
    print(
        json.dumps(
            {
                "framework": "floor",
                "version": platform.python_version(),
                "python": platform.python_version(),
                "per_iteration_us": samples,
                "median_us": statistics.median(samples),
            }
        )
    )


if __name__ == "__main__":
    main()
