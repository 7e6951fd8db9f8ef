"""Instructions per tool call of the host adapters, counted by callgrind: a figure no load moves.

Run from the repository root (needs valgrind and the ``adapters`` extra)::

    python -m bench.adapters_instructions                        # every host: native, policies
    python -m bench.adapters_instructions --host langchain --config shape
    python -m bench.adapters_instructions --tree DIR             # another checkout's loopware

What is counted
---------------
The runs of ``bench.adapters`` (one agent of 20 model steps of 5 parallel calls, 100 calls a
run; ``native`` is the host's own no-op hook, ``policies`` the adapter with ``ToolPolicy``,
``ToolCallLimit`` and ``RepetitionDetector``, ``shape`` LangChain's hand-written middleware of
the adapter's hooks). Each configuration runs in a process of its own under
``valgrind --tool=callgrind``, once with 1 run and once with 3 (after 2 warm-up runs each); the
difference over the 200 calls in between is one call's count, start-up and imports cancelled
out. ``--tree DIR`` puts ``DIR`` first on ``PYTHONPATH`` (its ``pipeline`` and ``middleware``)
while the runs stay this checkout's ``bench.adapters``: an older commit checked out in a
worktree is counted with the same scenario, the pair no other load on the machine can disturb.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench._callgrind import count_instructions

HOSTS = {
    "pydantic-ai": "pydantic_ai_runs",
    "langchain": "langchain_runs",
    "openai-agents": "openai_agents_runs",
    "adk": "adk_runs",
}
HERE = Path(__file__).resolve().parent.parent

SCENARIO = """
import asyncio, importlib.util, logging, sys, tempfile
from pathlib import Path

logging.disable(logging.WARNING)
spec = importlib.util.spec_from_file_location("bench_adapters", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
build, config, runs = getattr(bench, sys.argv[2]), sys.argv[3], int(sys.argv[4])


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        once = build(Path(tmp))[config]
        for _ in range(2 + runs):
            await once()


asyncio.run(main())
"""


def instructions(host: str, config: str, runs: int, folder: Path, tree: Path) -> int:
    """Instructions of a process that made 2 + ``runs`` runs of ``config`` on ``host``."""
    out = folder / f"callgrind.{host}.{config}.{runs}"
    args = ["-c", SCENARIO, str(HERE / "bench" / "adapters.py"), HOSTS[host], config, str(runs)]
    return count_instructions(args, out, tree)


def per_call(host: str, config: str, folder: Path, tree: Path) -> float:
    """Instructions per tool call: the 3-run and 1-run processes' difference over 200 calls."""
    many = instructions(host, config, 3, folder, tree)
    few = instructions(host, config, 1, folder, tree)
    return (many - few) / (2 * 100)


def main(argv: list[str] | None = None) -> int:
    """Print instructions per tool call for each host and configuration asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", choices=sorted(HOSTS), action="append")
    parser.add_argument("--config", action="append", help="default: native and policies")
    parser.add_argument("--tree", type=Path, help="count another checkout's loopware")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 1
    tree = (args.tree or HERE).resolve()
    configs = args.config or ["native", "policies"]
    print(f"instructions per tool call (runs of bench.adapters, 1 vs 3 runs); loopware: {tree}")
    with tempfile.TemporaryDirectory() as tmp:
        for host in args.host or HOSTS:
            counts = {c: per_call(host, c, Path(tmp), tree) for c in configs}
            line = "  ".join(f"{c} {n:,.0f}" for c, n in counts.items())
            added = ""
            if "native" in counts and "policies" in counts:
                added = f"  (policies over native {counts['policies'] - counts['native']:+,.0f})"
            print(f"  {host:<14} {line}{added}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
