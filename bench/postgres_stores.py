"""PostgreSQL against SQLite: stored turns per second, and audit rows per second from N processes.

Run: ``python -m bench.postgres_stores [--turns 500] [--processes 4] [--rows 500] [--quick]``.
Starts a throw-away PostgreSQL server (``tests/_pg.py``: ``initdb``/``pg_ctl``, Unix socket,
``fsync=off``) unless ``--conninfo`` names one.

1. Stores: ``--turns`` concurrent turns of three tool calls each (a scripted model, an echo tool,
   a runner), once on a `SqliteStore` (``synchronous="normal"``) and once on a `PostgresStore`;
   every call is then read back and counted, so a lost or doubled row fails the run.
2. Audit: ``--processes`` OS processes each append ``--rows`` rows (one awaited append per row)
   to one `PostgresAuditSink` chain at the same moment, against one process appending all of
   them to a `SqliteAuditSink`; the chain must verify and hold every row.

Figures depend on the machine and its load; the server runs without fsync (as in the tests),
so they measure loopware and the protocol, not the disk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from middleware.audit import PostgresAuditSink, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stores import FileSpoolStore, PostgresStore, SqliteStore

ROOT = Path(__file__).resolve().parents[1]


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


class ThreeCalls:
    """Proposes three echo calls per turn (ids from the turn's input), then answers."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = len(request.tool_calls)
        if done == 3:
            return ModelResponse(text="ok")
        key = request.messages[0].content
        arguments = json.dumps({"text": f"{key}:{done}"})
        return ModelResponse(
            tool_calls=[ProposedToolCall(id=f"{key}-{done}", name="echo", arguments=arguments)]
        )


async def run_turns(store: SqliteStore | PostgresStore, turns: int) -> float:
    """Run the turns on ``store``; return turns per second (after checking every call)."""
    runner = TurnRunner(executor=ToolLoopExecutor(ThreeCalls()), tools=[echo], store=store)
    started = time.perf_counter()
    results = await asyncio.gather(*(runner.run(f"u{i}") for i in range(turns)))
    elapsed = time.perf_counter() - started
    stored = 0
    for result in results:
        if result.status != "completed":
            raise SystemExit(f"a turn ended {result.status}: {result.errors}")
        stored += len(await store.tool_calls_for_turn(result.turn_id))
    if stored != 3 * turns:
        raise SystemExit(f"stored {stored} calls, expected {3 * turns}")
    return turns / elapsed


_APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import UTC, datetime
    from middleware.audit import AuditEntry, PostgresAuditSink

    conninfo, worker, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main():
        sink = PostgresAuditSink(conninfo, chain="bench")
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(rows):
            await sink.append([AuditEntry(
                kind="tool_call", turn_id=f"turn-{worker}", conversation_id=None,
                recorded_at=datetime.now(UTC), call_id=f"{worker}-{i}", tool="search",
                checksum="0" * 64, args='{"q":"x"}', decision="allowed")])
        sink.close()

    asyncio.run(main())
    """
)


def audit_processes(conninfo: str, processes: int, rows: int) -> float:
    """``processes`` processes append ``rows`` rows each to one chain; return rows per second."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, conninfo, str(w), str(rows)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
        )
        for w in range(processes)
    ]
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline() != "ready\n":
            raise SystemExit("an appender did not start")
    started = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        if child.wait() != 0:
            raise SystemExit("an appender failed")
    elapsed = time.perf_counter() - started
    sink = PostgresAuditSink(conninfo, chain="bench")
    try:
        if not sink.verify() or sink.head().count != processes * rows:
            raise SystemExit("the shared chain does not verify or lost rows")
    finally:
        sink.close()
    return processes * rows / elapsed


def audit_one_sqlite(path: Path, rows: int) -> float:
    """One process appends ``rows`` rows to an SQLite sink; return rows per second."""
    from datetime import UTC, datetime

    from middleware.audit import AuditEntry

    sink = SqliteAuditSink(path, synchronous="normal")

    async def go() -> float:
        started = time.perf_counter()
        for i in range(rows):
            await sink.append([AuditEntry(
                kind="tool_call", turn_id="t", conversation_id=None,
                recorded_at=datetime.now(UTC), call_id=f"c{i}", tool="search",
                checksum="0" * 64, args='{"q":"x"}', decision="allowed")])
        return rows / (time.perf_counter() - started)

    try:
        rate = asyncio.run(go())
        if not sink.verify():
            raise SystemExit("the SQLite chain does not verify")
    finally:
        sink.close()
    return rate


@contextlib.contextmanager
def server(conninfo: str | None) -> Iterator[tuple[str, str]]:
    """Yield (store database, audit database) connection strings."""
    if conninfo:
        yield conninfo, conninfo
        return
    from tests._pg import cluster

    with cluster() as pg:
        yield pg.create_database("bench_store"), pg.create_database("bench_audit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rows", type=int, default=500, help="audit rows per process")
    parser.add_argument("--conninfo", help="use this server instead of a throw-away one")
    parser.add_argument("--quick", action="store_true", help="a smoke run (small sizes)")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.processes, args.rows = 20, 2, 20
    with tempfile.TemporaryDirectory() as folder, server(args.conninfo) as (store_db, audit_db):
        base = Path(folder)

        async def stores() -> tuple[float, float]:
            async with SqliteStore(base / "turns.db", synchronous="normal") as lite:
                sqlite_rate = await run_turns(lite, args.turns)
            spool = FileSpoolStore(base / "spool")
            async with PostgresStore(store_db, spool=spool, max_size=8) as pg:
                pg_rate = await run_turns(pg, args.turns)
            return sqlite_rate, pg_rate

        sqlite_rate, pg_rate = asyncio.run(stores())
        print(f"stores, {args.turns} concurrent turns x 3 calls, one process:")
        print(f"  SqliteStore (synchronous=normal) {sqlite_rate:8.0f} turns/s")
        print(f"  PostgresStore (pool of 8)        {pg_rate:8.0f} turns/s")
        total = args.processes * args.rows
        lite_rows = audit_one_sqlite(base / "audit.sqlite", total)
        pg_rows = audit_processes(audit_db, args.processes, args.rows)
        print(f"audit, {total} rows, one awaited append per row:")
        print(f"  SqliteAuditSink, 1 process            {lite_rows:8.0f} rows/s")
        print(f"  PostgresAuditSink, {args.processes} processes, 1 chain {pg_rows:8.0f} rows/s"
              " (chain verified)")


if __name__ == "__main__":
    main()
