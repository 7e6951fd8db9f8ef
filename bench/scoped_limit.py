"""What a conversation-scoped `ToolCallLimit` costs per call, next to the turn-scoped one.

Run from the repository root::

    python -m bench.scoped_limit            # full sizes
    python -m bench.scoped_limit --quick    # a smoke run
    python -m bench.scoped_limit --conninfo "host=... dbname=..."   # an existing server

Starts a throw-away PostgreSQL server (``tests/_pg.py``; no fsync) unless ``--conninfo`` names
one. Every figure is microseconds per tool call, measured in this one process:

1. Turns: a scripted turn of ``--iterations`` iterations, one ``echo`` call each, in a
   conversation, on each store (`MemoryStore`, `SqliteStore` with ``synchronous="normal"``,
   `PostgresStore`). Per store, three runners: no limit, ``ToolCallLimit({"echo": ...})`` (the
   turn scope: the stash) and the same with ``scope="conversation"`` (the store: a reservation
   and a settle per call). Rounds alternate the three (A/B/C, C/B/A...) so drift hits each
   alike; the median over the rounds of (runner - no limit) / calls is printed, with the
   spread (min..max) beside it.
2. The store alone: ``reserve_slot`` + ``settle_slot`` awaited back to back, per store (100
   per counter, as in a conversation of 100 calls).
3. The floor: the same check in plain Python (a dict count compared with the limit).

Figures depend on the machine and its load; compare the columns of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from middleware import ToolCallLimit
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import (
    CounterLimit,
    CounterStore,
    FileSpoolStore,
    MemoryStore,
    PostgresStore,
    SqliteStore,
    TurnStore,
)
from pipeline.testing import ScriptedModel

BIG = 10**9
"""A limit never reached: the check runs in full and always grants."""


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


def script(iterations: int) -> list[ModelResponse]:
    steps = [
        ModelResponse(
            tool_calls=[
                ProposedToolCall(id=f"c{i}", name="echo", arguments=json.dumps({"text": str(i)}))
            ]
        )
        for i in range(iterations)
    ]
    return [*steps, ModelResponse(text="done")]


async def turn_seconds(store: TurnStore, limit: object | None, iterations: int, n: int) -> float:
    """Seconds for one turn, taken as the best of ``n`` (each in a new conversation)."""
    best = float("inf")
    for _ in range(n):
        runner = TurnRunner(
            executor=ToolLoopExecutor(ScriptedModel(script(iterations), record=False)),
            tools=[echo],
            middleware=[] if limit is None else [limit],
            store=store,
            max_iterations=iterations + 1,
        )
        start = time.perf_counter()
        await runner.run("go", conversation_id=f"bench-{time.perf_counter_ns()}")
        best = min(best, time.perf_counter() - start)
    return best


async def per_call_costs(
    store: TurnStore, iterations: int, rounds: int
) -> dict[str, list[float]]:
    """Per round, (turn with the limit - turn without) / calls, in microseconds."""
    runners: dict[str, object | None] = {
        "none": None,
        "turn": ToolCallLimit({"echo": BIG}),
        "conversation": ToolCallLimit({"echo": BIG}, scope="conversation"),
    }
    await turn_seconds(store, None, iterations, 1)  # warm up
    costs: dict[str, list[float]] = {"turn": [], "conversation": []}
    for r in range(rounds):
        order = list(runners) if r % 2 == 0 else list(reversed(runners))
        took = {name: await turn_seconds(store, runners[name], iterations, 2) for name in order}
        for name in costs:
            costs[name].append((took[name] - took["none"]) / iterations * 1e6)
    return costs


async def store_alone(store: CounterStore, calls: int) -> float:
    """Microseconds per reserve + settle pair, awaited back to back.

    A conversation of 100 calls per counter (a count holds one row per slot, so one counter
    of ``calls`` slots would measure a counter far past any real limit).
    """
    run = time.perf_counter_ns()
    start = time.perf_counter()
    for i in range(calls):
        counter = f"bench|conversation:{run}-{i // 100}|echo"
        limits = [CounterLimit(counter, BIG)]
        slot = f"s{i}"
        await store.reserve_slot(slot, limits, now=time.time(), ttl=300.0)
        await store.settle_slot(slot, [counter], consume=True, now=time.time())
    return (time.perf_counter() - start) / calls * 1e6


def floor(calls: int) -> float:
    """Microseconds per call of the check in plain Python: a dict count against a limit."""
    counts: dict[str, int] = {}
    start = time.perf_counter()
    for _ in range(calls):
        used = counts.get("echo", 0) + 1
        if used > BIG:
            raise AssertionError
        counts["echo"] = used
    return (time.perf_counter() - start) / calls * 1e6


@contextlib.contextmanager
def server(conninfo: str | None) -> Iterator[str]:
    """Yield a store database's connection string."""
    if conninfo:
        yield conninfo
        return
    from tests._pg import cluster

    with cluster() as pg:
        yield pg.create_database("bench_limits")


def spread(values: list[float]) -> str:
    return (
        f"{statistics.median(values):9.1f}  ({min(values):.1f}..{max(values):.1f})"
    )


async def run(args: argparse.Namespace, folder: Path, conninfo: str) -> None:
    sqlite = SqliteStore(folder / "turns.db", synchronous="normal")
    postgres = PostgresStore(conninfo, spool=FileSpoolStore(folder / "spool"))
    await postgres.open()
    stores: dict[str, TurnStore] = {
        "MemoryStore": MemoryStore(),
        "SqliteStore": sqlite,
        "PostgresStore": postgres,
    }
    try:
        print(
            f"scoped limits: us per tool call, {args.iterations}-iteration turns, "
            f"{args.rounds} rounds (median (min..max) of the rounds)"
        )
        print(f"{'store':16}{'turn scope':>26}{'conversation scope':>30}{'store alone':>14}")
        for name, store in stores.items():
            costs = await per_call_costs(store, args.iterations, args.rounds)
            assert isinstance(store, CounterStore)
            alone = await store_alone(store, args.calls)
            print(
                f"{name:16}{spread(costs['turn']):>26}{spread(costs['conversation']):>30}"
                f"{alone:>14.1f}"
            )
        print(f"{'plain-Python floor (dict count vs limit)':56}{floor(args.calls * 100):>14.3f}")
    finally:
        await sqlite.aclose()
        await postgres.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100, help="tool calls per turn")
    parser.add_argument("--rounds", type=int, default=7, help="A/B/C rounds per store")
    parser.add_argument("--calls", type=int, default=2000, help="store-alone pairs")
    parser.add_argument("--conninfo", help="use this PostgreSQL server")
    parser.add_argument("--quick", action="store_true", help="a smoke run (small sizes)")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.rounds, args.calls = 10, 2, 50
    with tempfile.TemporaryDirectory() as folder, server(args.conninfo) as conninfo:
        asyncio.run(run(args, Path(folder), conninfo))


if __name__ == "__main__":
    main()
