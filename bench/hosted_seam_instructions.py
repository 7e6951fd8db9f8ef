"""Instructions per call of the hosted seam alone (``pipeline.hosted``, no host), by callgrind.

Run from the repository root (needs valgrind)::

    python -m bench.hosted_seam_instructions                # this checkout
    python -m bench.hosted_seam_instructions --tree DIR     # another checkout's loopware

What is counted
---------------
A `HostedRunner` driven the way the hosts drive it, with no host around it, so what is counted
is loopware's share only:

* ``batches``: the adapters' pattern (``bench.adapters``): a turn of 20 model steps, each
  closing the previous batch (`HostedTurn.end_batch`), offering the tool when the turn does not
  know it, reading `HostedTurn.hidden`, then 5 parallel `HostedTurn.call`s with a host handler
  (arguments as JSON text plus the host's validation of them); 100 calls a turn;
* ``lone``: the MCP gateway's pattern: every call closes the batch before it, then one
  `HostedTurn.call` of a registered loopware tool (no host handler), 100 calls a turn.

Each with an empty stack and with ``ToolPolicy`` + ``ToolCallLimit`` + ``RepetitionDetector``
(``policies``). Each configuration runs in a process of its own under
``valgrind --tool=callgrind``, once with 1 turn and once with 3 (after 2 warm-up turns); the
difference over the 200 calls in between is one call's count. ``--tree DIR`` puts ``DIR`` first
on ``PYTHONPATH``: an older commit (``git archive``) is counted with the same scenario.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench._callgrind import count_instructions

HERE = Path(__file__).resolve().parent.parent
PATTERNS = ("batches", "lone")
STACKS = ("empty", "policies")

SCENARIO = """
import asyncio, json, sys

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from pipeline import tool
from pipeline.hosted import HostedRunner, HostTool

pattern, stack, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
HOST_TOOL = HostTool("echo", "Echo.", SCHEMA)


@tool
async def echo(text: str) -> str:
    \"\"\"Echo the text.\"\"\"
    return text


async def centre(args):
    return {"echo": args["text"]}


async def batches(runner, n):
    turn = await runner.begin("go")
    for step in range(20):
        await turn.end_batch()
        if not turn.knows("echo"):
            turn.offer([HOST_TOOL])
        turn.hidden()
        calls = []
        for i in range(5):
            args = {"text": f"{n} {step} {i}"}
            calls.append(turn.call(f"c{n}_{step}_{i}", "echo", json.dumps(args), centre,
                                   validated=args))
        await asyncio.gather(*calls)
    await turn.finish()


async def lone(runner, n):
    turn = await runner.begin("go")
    for i in range(100):
        await turn.end_batch()
        await turn.call(f"c{n}_{i}", "echo", {"text": f"{n} {i}"})
    await turn.finish()


async def main():
    middleware = []
    if stack == "policies":
        middleware = [ToolPolicy(deny=["nothing_*"]), ToolCallLimit({}, total=10**9),
                      RepetitionDetector(threshold=3)]
    tools = [echo] if pattern == "lone" else []
    runner = HostedRunner(tools=tools, middleware=middleware)
    run = batches if pattern == "batches" else lone
    for n in range(2 + turns):
        await run(runner, n)


asyncio.run(main())
"""


def instructions(pattern: str, stack: str, turns: int, folder: Path, tree: Path) -> int:
    """Instructions of a process that ran 2 + ``turns`` turns of ``pattern`` with ``stack``."""
    out = folder / f"callgrind.{pattern}.{stack}.{turns}"
    return count_instructions(["-c", SCENARIO, pattern, stack, str(turns)], out, tree)


def main(argv: list[str] | None = None) -> int:
    """Print instructions per call for each pattern and stack."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pattern", choices=PATTERNS, action="append")
    parser.add_argument("--tree", type=Path, help="count another checkout's loopware")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 1
    tree = (args.tree or HERE).resolve()
    print(f"instructions per call of the hosted seam (1 vs 3 turns of 100 calls); loopware: {tree}")
    with tempfile.TemporaryDirectory() as tmp:
        for pattern in args.pattern or PATTERNS:
            counts = {
                stack: (
                    instructions(pattern, stack, 3, Path(tmp), tree)
                    - instructions(pattern, stack, 1, Path(tmp), tree)
                )
                / 200
                for stack in STACKS
            }
            line = "  ".join(f"{stack} {n:,.0f}" for stack, n in counts.items())
            print(f"  {pattern:<8} {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
