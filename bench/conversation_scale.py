"""A turn's start cost as its conversation grows: the 10th turn against the 10,000th.

Run from the repository root::

    python -m bench.conversation_scale                      # 10,000 turns, SQLite and PostgreSQL
    python -m bench.conversation_scale --store sqlite --turns 2000
    python -m bench.conversation_scale --quick              # 300 turns, a smoke run

What is measured
----------------
* One conversation of ``--turns`` turns through one real `TurnRunner` on each store:
  `SqliteStore` (a file, ``synchronous="normal"``), `PostgresStore` (a throw-away PostgreSQL
  server: ``tests/_pg.py``, ``initdb``/``pg_ctl``, Unix socket, ``fsync=off``, unless
  ``--conninfo`` names one; skipped when no PostgreSQL is installed) and `MemoryStore`.
* Each turn stores ``--calls`` tool calls through the ``tool_call`` stage, with
  ``RepetitionDetector`` (every call reads the conversation's counts) and ``ToolCallLimit``;
  arguments cycle over 50 values, so checksums repeat. ``--conversation-limit`` makes the limit
  ``scope="conversation"`` (its slots are counted in the store: see its own figures). The executor
  replays (as ``middleware.transcripts`` does): it never reads the history's records, only the
  counts. An executor that sends the model the whole conversation reads it once per turn
  (that is what the model asks for).
* Paired: each turn of the long conversation runs beside a turn of a short one (a new
  conversation every ``--window`` turns) on the same runner and store, so the load of a shared
  machine weighs on both alike.
* Start cost: from ``runner.run()`` to the turn's first ``IterationStart`` (loading the
  conversation, ``TurnStart``, the user message stored, ``turn_input``), in CPU time of this
  process (the store's worker thread included; PostgreSQL's server is another process) and wall
  time. Turn cost: the whole ``run()``. Each figure is the median over a window of turns:
  ``early`` after the first ``--window`` turns, ``late`` the last ``--window``.
* Verdict: over the last ``--window`` turns, the median of the paired ratios (the long
  conversation's start CPU over the short one's) is within 5% (``--tolerance``). The long
  conversation's last turns against its own early ones are printed too (noisier: minutes apart).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from middleware import RepetitionDetector, ToolCallLimit
from pipeline import DispatchContext, TurnRunner, tool
from pipeline.events import IterationStart
from pipeline.models import Message
from pipeline.stores import MemorySpoolStore, MemoryStore, PostgresStore, SqliteStore

_ARGS = 50


@tool
def lookup(q: int) -> str:
    """Look a number up."""
    return str(q)


class Replayer:
    """Stores ``calls`` lookup calls per turn through the ``tool_call`` stage, then answers.

    Notes when each turn's first iteration starts (the end of the turn's start).
    """

    def __init__(self, calls: int) -> None:
        """Store ``calls`` calls per turn."""
        self.calls = calls
        self.entered: tuple[float, float] | None = None
        self.stored = 0

    def take_entered(self) -> tuple[float, float] | None:
        """The noted start of the turn that ran last (None if none), forgotten for the next."""
        entered, self.entered = self.entered, None
        return entered

    def started(self, event: IterationStart) -> None:
        """Note the first iteration's start of each turn."""
        if self.entered is None:
            self.entered = (time.process_time(), time.perf_counter())

    async def __call__(self, ctx: DispatchContext) -> None:
        """One iteration: store one call, or answer once the turn stored its calls."""
        if len(ctx.turn_tool_calls) >= self.calls:
            await ctx.store_message(Message(role="assistant", content="done"))
            ctx.ack()
            return
        self.stored += 1
        cid = f"call_{self.stored}"
        await ctx.store_message(Message(role="assistant", content="", tool_call_ids=(cid,)))
        call = await ctx.run_tool("lookup", f'{{"q": {self.stored % _ARGS}}}', call_id=cid)
        await ctx.store_tool_call(call)


def median_ms(rows: Sequence[tuple[float, ...]], column: int) -> float:
    """The median of one column of the rows, in milliseconds."""
    return statistics.median(row[column] for row in rows) * 1000


async def one_turn(
    runner: TurnRunner, replayer: Replayer, text: str, conversation_id: str
) -> tuple[float, float, float, float]:
    """Run one turn; return its start CPU, start wall, turn CPU and turn wall (seconds)."""
    replayer.take_entered()
    cpu, wall = time.process_time(), time.perf_counter()
    result = await runner.run(text, conversation_id=conversation_id)
    cpu_end, wall_end = time.process_time(), time.perf_counter()
    entered = replayer.take_entered()
    if result.status != "completed" or entered is None:
        raise SystemExit(f"{conversation_id}: {text} ended {result.status}: {result.errors}")
    cpu_in, wall_in = entered
    return cpu_in - cpu, wall_in - wall, cpu_end - cpu, wall_end - wall


async def run_store(
    name: str, store: Any, turns: int, calls: int, window: int, scope: str
) -> float:
    """Run the long conversation beside short ones on ``store``; return late long / short."""
    replayer = Replayer(calls)
    limit = (
        ToolCallLimit(total=10**9)
        if scope == "turn"
        else ToolCallLimit(total=10**9, scope="conversation")
    )
    runner = TurnRunner(
        executor=replayer,
        tools=[lookup],
        middleware=[RepetitionDetector(threshold=10**9), limit],  # they read; never fire
        store=store,
    )
    runner.on(IterationStart, replayer.started)
    long: list[tuple[float, float, float, float]] = []
    short: list[tuple[float, float, float, float]] = []
    for turn in range(turns):  # paired: the machine's load changes both alike
        long.append(await one_turn(runner, replayer, f"turn {turn}", "long"))
        short.append(await one_turn(runner, replayer, f"turn {turn}", f"short-{turn // window}"))
    print(
        f"\n{name}: {turns} turns of {calls} calls ({turns * calls} calls in the end), "
        f"ToolCallLimit scope={scope}; each beside a turn of a conversation under {window} turns"
    )
    print(
        f"{'turns':>12} {'conversation':>13} {'start cpu ms':>13} {'start wall ms':>14} "
        f"{'turn cpu ms':>12}"
    )
    windows = (
        (f"{window}-{2 * window}", slice(window, 2 * window)),
        (f"last {window}", slice(-window, None)),
    )
    for label, part in windows:
        for kind, rows in (("long", long[part]), ("short", short[part])):
            print(
                f"{label:>12} {kind:>13} {median_ms(rows, 0):>13.3f} {median_ms(rows, 1):>14.3f} "
                f"{median_ms(rows, 2):>12.3f}"
            )
    late = slice(-window, None)
    paired = statistics.median(a[0] / b[0] for a, b in zip(long[late], short[late], strict=True))
    early = median_ms(long[window : 2 * window], 0)
    print(
        f"last {window} turns: start CPU of the long conversation / a short one beside it "
        f"(median of pairs) {paired:.2f}; against its own turns {window}-{2 * window}: "
        f"{median_ms(long[late], 0) / early:.2f}"
    )
    return paired


@contextlib.contextmanager
def postgres(wanted: bool, conninfo: str | None) -> Iterator[str | None]:
    """A PostgreSQL connection string: ``conninfo``, a throw-away server's, or None."""
    if not wanted:
        yield None
        return
    if conninfo:
        yield conninfo
        return
    from tests._pg import cluster, find_bindir

    if find_bindir() is None:
        yield None
        return
    with cluster() as pg:
        yield pg.create_database("bench_conversation")


@contextlib.asynccontextmanager
async def opened(kind: str, folder: Path, conninfo: str | None) -> AsyncIterator[Any]:
    """The store of ``kind``, open, closed afterwards."""
    if kind == "memory":
        yield MemoryStore()
    elif kind == "sqlite":
        async with SqliteStore(folder / "conversation.db", synchronous="normal") as lite:
            yield lite
    else:
        async with PostgresStore(conninfo or "", spool=MemorySpoolStore()) as pg:
            yield pg


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 when every store's late starts cost what early ones do."""
    parser = argparse.ArgumentParser(prog="python -m bench.conversation_scale")
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres", "memory"),
        action="append",
        help="repeatable; default: sqlite and postgres",
    )
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2, help="tool calls per turn")
    parser.add_argument("--window", type=int, default=200, help="turns per median")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--conninfo", help="use this PostgreSQL server")
    parser.add_argument(
        "--conversation-limit",
        action="store_true",
        help='ToolCallLimit(scope="conversation") instead of the turn scope',
    )
    parser.add_argument("--quick", action="store_true", help="300 turns, a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.window = 300, 50
    kinds = args.store or ["sqlite", "postgres"]
    print(f"conversation scale: Python {platform.python_version()}, {platform.machine()}")
    ratios: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="loopware-bench-") as folder,
        postgres("postgres" in kinds, args.conninfo) as conninfo,
    ):
        for kind in kinds:
            if kind == "postgres" and not conninfo:
                print("\npostgres: skipped (no PostgreSQL installed, no --conninfo)")
                continue

            async def one(kind: str = kind) -> float:
                async with opened(kind, Path(folder), conninfo) as store:
                    scope = "conversation" if args.conversation_limit else "turn"
                    return await run_store(kind, store, args.turns, args.calls, args.window, scope)

            ratios[kind] = asyncio.run(one())
    flat = all(r <= 1 + args.tolerance for r in ratios.values())
    summary = ", ".join(f"{k} {r:.2f}" for k, r in ratios.items())
    print(f"\nlong / short start CPU: {summary} ({'flat' if flat else 'NOT flat'})")
    return 0 if flat or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
