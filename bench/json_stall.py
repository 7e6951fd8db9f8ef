"""How long parsing a JSON result keeps the event loop (every other turn on it) waiting.

Run from the repository root::

    python -m bench.json_stall            # sizes up to 16 MiB (about a minute)
    python -m bench.json_stall --quick    # up to 2 MiB, for a smoke test

Artifact queries run in a worker thread, but the stdlib's JSON parser holds the interpreter lock
until the whole value is built, so a parse stalls the loop for about as long as it runs (longer
than the size alone says: the garbage collector walks the growing document again and again).
For each size and three shapes of document (records in an array, a deeply nested array, one wide
object), a `SpooledJsonArtifact` whose ``json_max_bytes`` admits the body is parsed in a worker
thread, the way a query parses it, while `pipeline.testing.StallMeter` ticks on the loop. The
figure is the median of three runs' worst stalls (one run disturbed by the machine's other load
does not decide it). The
floor is the same meter beside an idle worker thread. ``SpooledJsonArtifact.json_max_bytes``
(1 MiB by default) is the largest body a query parses whole: past it, queries refuse and say
what to read it with instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
from collections.abc import Callable

from pipeline.artifacts import SpooledJsonArtifact
from pipeline.stores import MemorySpoolStore
from pipeline.testing import StallMeter

KIB = 1024
RUNS = 3


def records(size: int) -> str:
    """An object holding an array of small records."""
    one = {"id": 12345, "name": "item 12345", "tags": ["a", "b"], "v": 0.5}
    return json.dumps({"items": [one] * (size // (len(json.dumps(one)) + 2))})


def nested(size: int) -> str:
    """A deeply placed array of two-element arrays."""
    return json.dumps({"a": {"b": {"c": {"d": [[1234, "1234"]] * (size // 16)}}}})


def wide(size: int) -> str:
    """One object with many keys."""
    return json.dumps({f"key{i:08d}": i for i in range(size // 18)})


SHAPES: dict[str, Callable[[int], str]] = {"records": records, "nested": nested, "wide": wide}


async def stall(work: Callable[[], object]) -> float:
    """The median, over `RUNS` runs, of the worst loop stall while ``work`` runs in a thread."""
    worst: list[float] = []
    for _ in range(RUNS):
        async with StallMeter() as meter:
            await asyncio.to_thread(work)
        worst.append(meter.worst)
    return statistics.median(worst)


def parse_of(body: str) -> Callable[[], object]:
    """A fresh artifact's whole-document parse, the way the first JSON query runs it."""

    class Admitting(SpooledJsonArtifact):
        json_max_bytes = len(body) + 1

    store = MemorySpoolStore()

    def parse() -> object:
        return Admitting(store.write("a", body), format="json").document()

    return parse


async def main(sizes: list[int]) -> None:
    """Print the stall per size and shape, and the floor."""
    bound = SpooledJsonArtifact.json_max_bytes
    print(f"loop stall while a JSON body is parsed  (python {sys.version.split()[0]}, "
          f"{platform.machine()})")
    print(f"floor (an idle worker thread): {await stall(lambda: None) * 1000:6.1f} ms")
    print(f"{'size':>9}  " + "  ".join(f"{name:>9}" for name in SHAPES) + "   (ms, median of 3)")
    for size in sizes:
        cells = [await stall(parse_of(make(size))) * 1000 for make in SHAPES.values()]
        mark = "  <- json_max_bytes (default)" if size == bound else ""
        print(f"{size // KIB:>6} KiB  " + "  ".join(f"{c:9.1f}" for c in cells) + mark)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 2 MiB")
    args = parser.parse_args()
    top = 2048 if args.quick else 16384
    sizes = [s * KIB for s in (256, 512, 1024, 2048, 4096, 8192, 16384) if s <= top]
    asyncio.run(main(sizes))
