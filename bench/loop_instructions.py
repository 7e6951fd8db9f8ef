"""Instructions per iteration of the turn loop, counted by callgrind: a figure no load can move.

Run from the repository root (needs valgrind)::

    python -m bench.loop_instructions              # the three configurations and the floor
    python -m bench.loop_instructions --quick      # fewer turns, for a smoke test
    python -m bench.loop_instructions --tree DIR   # the same scenarios, run on another checkout

What is counted
---------------
The scenarios of ``bench.loop_overhead`` (a 50-iteration scripted turn, one ``echo`` call per
iteration with fresh arguments, through `TurnRunner` + `ToolLoopExecutor` with the default
stores): no middleware, the five ``tool_call`` layers users write (state kept in the stash, as
the README shows), the five built-in layers, and those with an `AuditLog` (a JSON Lines chain,
``synchronous="normal"``), plus the plain-Python floor (the same calls made directly). Each
runs in a process of its own under ``valgrind --tool=callgrind``, once with ``--few`` turns and
once with ``--many``; the difference over the difference of the iterations is one iteration's
cost, start-up and warm-up cancelled out. Every process warms up with two turns first.

``--tree DIR`` runs the scenarios with ``DIR`` first on ``PYTHONPATH`` (its ``pipeline``,
``middleware`` and ``bench.loop_overhead``), so an older commit checked out in a worktree is
counted with the same method in the same run: a pair no other load on the machine can disturb.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench._callgrind import count_instructions

CONFIGURATIONS = {
    "floor": "plain-Python floor (the same calls made directly)",
    "none": "no middleware",
    "stash": "5 tool_call layers (stash-backed, as the README shows)",
    "builtins": "5 built-in layers",
    "audit": "5 built-in layers and an audit log (JSON Lines)",
}
ITERATIONS = 50
"""Iterations per turn, as in ``bench.loop_overhead``."""

SCENARIO = """
import asyncio, sys, tempfile
from bench.loop_overhead import five_layers, five_tool_call_layers, floor_turn, make_runner, script
from middleware.audit import AuditLog, JsonlAuditSink

config, turns, iterations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


async def run() -> None:
    if config == "floor":
        steps = script(iterations)
        for _ in range(2 + turns):
            floor_turn(steps)
        return
    if config == "audit":
        log = f"{tempfile.mkdtemp()}/audit.jsonl"
        stack = [*five_layers(), AuditLog(JsonlAuditSink(log, synchronous="normal"))]
    else:
        stack = {"none": list, "stash": five_tool_call_layers, "builtins": five_layers}[config]()
    runner = make_runner(iterations, stack)
    for _ in range(2 + turns):
        result = await runner.run("go")
        if result.status != "completed":
            raise SystemExit(f"a benchmark turn did not complete: {result.errors}")


asyncio.run(run())
"""


def instructions(config: str, turns: int, folder: Path, tree: Path | None) -> int:
    """Instructions of a process that ran ``turns`` turns (and two warm-up turns) of ``config``."""
    out = folder / f"callgrind.{config}.{turns}"
    root = tree if tree is not None else Path(__file__).resolve().parent.parent
    return count_instructions(["-c", SCENARIO, config, str(turns), str(ITERATIONS)], out, root)


def per_iteration(config: str, few: int, many: int, folder: Path, tree: Path | None) -> float:
    """Instructions per iteration of ``config``: the two runs' difference over their turns'."""
    low = instructions(config, few, folder, tree)
    high = instructions(config, many, folder, tree)
    return (high - low) / ((many - few) * ITERATIONS)


def main(argv: list[str] | None = None) -> int:
    """Print instructions per iteration for each configuration (and the floor)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 3 turns instead of 2 and 10")
    parser.add_argument("--tree", type=Path, help="count another checkout's loop instead")
    parser.add_argument("--only", choices=sorted(CONFIGURATIONS), action="append")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 0 if args.quick else 1
    few, many = (1, 3) if args.quick else (2, 10)
    where = args.tree.resolve() if args.tree is not None else None
    print(f"instructions per iteration ({ITERATIONS}-iteration turns, {few} vs {many} turns)")
    print(f"tree: {where or Path(__file__).resolve().parent.parent}")
    counts: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.only or CONFIGURATIONS:
            counts[config] = per_iteration(config, few, many, Path(tmp), where)
            floor = counts.get("floor")
            over = ""
            if floor is not None and config != "floor":
                over = f"  (over floor {counts[config] - floor:,.0f})"
            print(f"  {CONFIGURATIONS[config]:<55} {counts[config]:>9,.0f}{over}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
