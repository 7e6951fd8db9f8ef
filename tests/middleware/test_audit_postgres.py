"""`PostgresAuditSink` specifics: one linear chain from many OS processes, named chains, errors.

What every sink shares (order, reopening, tamper detection) is pinned by the parametrised suite
in ``test_audit_sinks.py``; these are the parts only the PostgreSQL sink has.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from middleware.audit import AuditEntry, AuditLog, AuditRow, PostgresAuditSink
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import RecordChange
from pipeline.stores import TransactionWriter
from pipeline.testing import ScriptedModel

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra: postgres)")

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
APPENDS = 60


def entry(call_id: str) -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id="t",
        conversation_id=None,
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC),
        call_id=call_id,
        tool="search",
        checksum="0" * 64,
        args='{"q":"x"}',
        decision="allowed",
    )


def append(sink: PostgresAuditSink, entries: list[AuditEntry]) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        return await sink.append(entries)

    return asyncio.run(go())


def drop_connections(conninfo: str) -> None:
    """End every other session on the test database, as a server restart would."""
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import UTC, datetime
    from middleware.audit import AuditEntry, PostgresAuditSink

    conninfo, worker, appends = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def entry(call_id):
        return AuditEntry(kind="tool_call", turn_id=f"turn-{worker}", conversation_id=None,
                          recorded_at=datetime.now(UTC), call_id=call_id, tool="search",
                          checksum="0" * 64, args='{"q":"x"}', decision="allowed")

    async def main():
        sink = PostgresAuditSink(conninfo, chain="shared")
        print("ready", flush=True)
        sys.stdin.readline()  # every process starts appending at the same moment
        # a few appends in flight at once per process, each of one to three rows
        for start in range(0, appends, 5):
            await asyncio.gather(*(
                sink.append([entry(f"{worker}-{i}-{j}") for j in range(i % 3 + 1)])
                for i in range(start, min(start + 5, appends))
            ))
        sink.close()

    asyncio.run(main())
    """
)


async def test_processes_appending_at_once_form_one_linear_chain(pg_conninfo: str) -> None:
    """Four OS processes appending to one chain at once: it verifies, no row lost or doubled."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, pg_conninfo, str(w), str(APPENDS), env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for w in range(PROCESSES)
    ]
    for child in children:
        assert child.stdout is not None
        assert await child.stdout.readline() == b"ready\n"
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        await child.stdin.drain()
    for child in children:
        _, err = await child.communicate()
        assert child.returncode == 0, err.decode()

    sink = PostgresAuditSink(pg_conninfo, chain="shared")
    try:
        rows = sink.rows()
        assert sink.verify()
        head = sink.head()
    finally:
        sink.close()
    per_process = sum(i % 3 + 1 for i in range(APPENDS))
    assert len(rows) == head.count == PROCESSES * per_process
    assert [r.index for r in rows] == list(range(len(rows)))
    ids = [str(r.entry.call_id) for r in rows]
    assert max(Counter(ids).values()) == 1  # nothing doubled
    for w in range(PROCESSES):
        mine = [i for i in ids if i.startswith(f"{w}-")]
        assert len(mine) == per_process  # nothing lost
        # each append's rows are contiguous and in order
        for i in range(APPENDS):
            batch = [f"{w}-{i}-{j}" for j in range(i % 3 + 1)]
            at = ids.index(batch[0])
            assert ids[at : at + len(batch)] == batch


def test_loops_in_threads_appending_at_once_share_one_sinks_linear_chain(pg_conninfo: str) -> None:
    """One sink, four threads each running its own event loop (its own connection), appending
    in groups at once: one chain that verifies, nothing lost or doubled, each loop's appends
    in the order it made them, and the sink's head the last one written."""
    sink = PostgresAuditSink(pg_conninfo, chain="threads")
    start = threading.Barrier(4)

    def worker(w: int) -> None:
        async def go() -> None:
            start.wait()
            for first in range(0, 30, 5):  # five appends in flight at once: one group commit
                await asyncio.gather(
                    *(sink.append([entry(f"{w}-{i}-{j}") for j in range(2)])
                      for i in range(first, first + 5))
                )  # fmt: skip

        asyncio.run(go())

    try:
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = sink.rows()
        assert sink.verify()
        assert sink.head().count == len(rows) == 4 * 30 * 2
        ids = [str(r.entry.call_id) for r in rows]
        assert max(Counter(ids).values()) == 1
        for w in range(4):
            mine = [i for i in ids if i.startswith(f"{w}-")]
            assert mine == [f"{w}-{i}-{j}" for i in range(30) for j in range(2)]
    finally:
        sink.close()


def test_appends_from_loops_that_come_and_go_keep_chaining(pg_conninfo: str) -> None:
    """A loop per call (``asyncio.run``), as a script makes them: every append is chained, and
    closing the sink afterwards leaves no connection open."""
    sink = PostgresAuditSink(pg_conninfo, chain="loops")
    try:
        for i in range(5):
            [row] = append(sink, [entry(f"r{i}")])
            assert row.index == i
        assert [r.entry.call_id for r in sink.rows()] == [f"r{i}" for i in range(5)]
        assert sink.verify()
    finally:
        sink.close()
    with psycopg.connect(pg_conninfo, autocommit=True) as admin:
        [(left,)] = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
    assert left == 0


def test_close_waits_for_appends_on_another_threads_loop(pg_conninfo: str) -> None:
    """``close`` from another thread lets a loop's writes in flight finish: no row is lost."""
    sink = PostgresAuditSink(pg_conninfo, chain="closing")
    ready = threading.Event()
    appended: list[AuditRow] = []
    loop = asyncio.new_event_loop()

    async def go() -> None:
        pending = [sink.append([entry(f"c{i}")]) for i in range(20)]
        ready.set()
        for rows in await asyncio.gather(*pending):
            appended.extend(rows)

    runner = threading.Thread(target=loop.run_until_complete, args=(go(),))
    runner.start()
    ready.wait()
    sink.close()
    runner.join()
    loop.close()
    check = PostgresAuditSink(pg_conninfo, chain="closing")
    try:
        assert [r.entry.call_id for r in check.rows()] == [f"c{i}" for i in range(20)]
        assert len(appended) == 20
        assert check.verify()
    finally:
        check.close()


def test_chains_with_different_names_are_independent(pg_conninfo: str) -> None:
    """Two named chains in one database each start at row 0 and verify on their own."""
    first = PostgresAuditSink(pg_conninfo, chain="a")
    second = PostgresAuditSink(pg_conninfo, chain="b")
    try:
        for i in range(3):
            append(first, [entry(f"a{i}")])
            append(second, [entry(f"b{i}")])
        assert [r.index for r in first.rows()] == [0, 1, 2]
        assert [r.entry.call_id for r in second.rows()] == ["b0", "b1", "b2"]
        assert first.verify()
        assert second.verify()
        assert first.head() != second.head()
    finally:
        first.close()
        second.close()


async def test_an_append_after_the_connection_dropped_reconnects(pg_conninfo: str) -> None:
    """A connection the server closed (restart, idle timeout) is re-opened by the next append."""
    sink = PostgresAuditSink(pg_conninfo, chain="c")
    try:
        await sink.append([entry("before")])
        drop_connections(pg_conninfo)
        with pytest.raises(psycopg.OperationalError):
            await sink.append([entry("lost")])  # the broken connection fails this append ...
        [row] = await sink.append([entry("after")])  # ... and the next one reconnects
        assert row.index == 1
        assert [r.entry.call_id for r in sink.rows()] == ["before", "after"]
        assert sink.verify()  # the sink's own connection (for these reads) reconnected too
    finally:
        sink.close()


async def test_a_failed_group_commit_fails_every_append_of_the_group(pg_conninfo: str) -> None:
    """Appends made together are written in one transaction: when it fails, each of them
    raises (none is acknowledged without its row), and the next append writes again."""
    sink = PostgresAuditSink(pg_conninfo, chain="group")
    try:
        await sink.append([entry("before")])
        drop_connections(pg_conninfo)
        outcomes = await asyncio.gather(
            *(sink.append([entry(f"lost{i}")]) for i in range(3)), return_exceptions=True
        )
        assert [isinstance(o, psycopg.OperationalError) for o in outcomes] == [True] * 3
        [row] = await sink.append([entry("after")])
        assert row.index == 1
        assert [r.entry.call_id for r in sink.rows()] == ["before", "after"]
        assert sink.verify()
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"conninfo": ""}, "conninfo"),
        ({"conninfo": 7}, "conninfo"),
        ({"chain": ""}, "chain"),
        ({"chain": "a\x00b"}, "chain"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": True}, "timeout"),
    ],
    ids=["empty", "int", "empty-chain", "nul-chain", "zero-timeout", "bool-timeout"],
)
def test_bad_options_raise_invalid_middleware_config(
    kwargs: dict[str, object], problem: str
) -> None:
    """Each bad option is named in an InvalidMiddlewareConfigError before anything connects."""
    options: dict[str, object] = {"conninfo": "dbname=x", **kwargs}
    with pytest.raises(InvalidMiddlewareConfigError, match=problem):
        PostgresAuditSink(**options)  # type: ignore[arg-type]


def test_an_unreachable_server_is_a_config_error(tmp_path: Path) -> None:
    """A server that cannot be reached raises InvalidMiddlewareConfigError at construction."""
    with pytest.raises(InvalidMiddlewareConfigError, match="cannot open"):
        PostgresAuditSink(f"host={tmp_path} port=1 dbname=x", timeout=1)


def test_a_newer_audit_schema_is_refused(pg_conninfo: str) -> None:
    """Audit tables written by a newer loopware raise InvalidMiddlewareConfigError."""
    PostgresAuditSink(pg_conninfo).close()
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute("INSERT INTO loopware.audit_migrations (version) VALUES (7)")
    with pytest.raises(InvalidMiddlewareConfigError, match="version 7"):
        PostgresAuditSink(pg_conninfo)


async def test_a_store_and_an_audit_sink_share_one_database(pg_conninfo: str) -> None:
    """PostgresStore and PostgresAuditSink in one database keep their own tables and versions."""
    from pipeline.calls import ToolCall
    from pipeline.stores import MemorySpoolStore, PostgresStore

    sink = PostgresAuditSink(pg_conninfo)
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
        await store.save_tool_call("c", "t", ToolCall.completed(id="a", tool="x", args={},
                                                                results="r"))
        await sink.append([entry("a")])
        _, [call] = await store.load_conversation("c")
    try:
        assert call.id == "a"
        assert [r.entry.call_id for r in sink.rows()] == ["a"]
        assert sink.verify()
    finally:
        sink.close()
    with psycopg.connect(pg_conninfo) as conn:
        store_versions = conn.execute("SELECT version FROM loopware.schema_migrations").fetchall()
        audit_versions = conn.execute("SELECT version FROM loopware.audit_migrations").fetchall()
    assert (store_versions, audit_versions) == (
        [(1,), (2,), (3,), (4,), (5,), (6,)],
        [(1,), (2,), (3,)],
    )


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"results for {q}"


class _FailingCoWriter:
    """A second keeper on the same database whose writer fails for one call id."""

    def __init__(self, database: str | None, call_id: str) -> None:
        self.database = database
        self.call_id = call_id

    def keep(self, change: RecordChange) -> Awaitable[object]:
        raise AssertionError("a keeper joining the store's database is never asked to keep")

    def joins(self, database: str) -> bool:
        return database == self.database

    def joint(self, change: RecordChange) -> TransactionWriter:
        fail = change.call.id == self.call_id

        class Writer:
            async def write(self, connection: object) -> None:
                if fail:
                    raise RuntimeError("the co-writer fails")

            def settle(self, committed: bool) -> None:
                return None

        return Writer()


def _turn(steps: list[ModelResponse], middleware: list[object], store: object) -> TurnRunner:
    return TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[search],
                      middleware=middleware, store=store)  # type: ignore[arg-type]


def _step(call_id: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=[ProposedToolCall(id=call_id, name="search", arguments='{"q": "x"}')]
    )


async def test_a_store_and_a_sink_on_one_database_commit_each_call_with_its_row(
    pg_conninfo: str,
) -> None:
    """PostgresStore and PostgresAuditSink on one database: the sink joins the store's
    transactions, so each call's row was inserted by the very transaction that stored the
    call (the same ``xmin``), and the chain and the sink's head are current."""
    from pipeline.stores import MemorySpoolStore, PostgresStore

    sink = PostgresAuditSink(pg_conninfo)
    try:
        async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
            assert store.transaction_database == sink.database
            result = await _turn([_step("a"), _step("b")], [AuditLog(sink)], store).run(
                "go", conversation_id="c"
            )
        assert result.status == "completed"
        rows = sink.rows()
        assert [(r.entry.kind, r.entry.call_id) for r in rows] == [
            ("tool_call", "a"), ("tool_call", "b"), ("turn", None)
        ]
        assert sink.verify()
        assert sink.head().count == 3
    finally:
        sink.close()
    with psycopg.connect(pg_conninfo) as conn:
        calls = dict(conn.execute(
            "SELECT convert_from(id, 'UTF8'), xmin::text FROM loopware.tool_calls"
        ).fetchall())
        audited = dict(conn.execute(
            "SELECT convert_from(call_id, 'UTF8'), xmin::text FROM loopware.audit_rows "
            "WHERE kind = 'tool_call'"
        ).fetchall())
    assert calls == audited
    assert calls["a"] != calls["b"]


async def test_a_failed_store_transaction_on_the_shared_database_keeps_no_row(
    pg_conninfo: str,
) -> None:
    """When the store's transaction fails (here another joint writer raises for call ``b``),
    the call's row is rolled back with it: the audit never names a call the store lost."""
    from pipeline.stores import MemorySpoolStore, PostgresStore

    sink = PostgresAuditSink(pg_conninfo)
    try:
        async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
            await store.open()
            failing = _FailingCoWriter(store.transaction_database, "b")
            result = await _turn(
                [_step("a"), _step("b")], [AuditLog(sink), failing], store
            ).run("go", conversation_id="c")
            stored = [c.id for c in await store.tool_calls_for_turn(result.turn_id)]
        assert result.status == "failed"
        assert stored == ["a"]
        assert [r.entry.call_id for r in sink.rows() if r.entry.kind == "tool_call"] == ["a"]
        assert sink.verify()
    finally:
        sink.close()


_KILLED = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import UTC, datetime
    from middleware.audit import AuditEntry, PostgresAuditSink

    conninfo, run = sys.argv[1], sys.argv[2]

    def entry(call_id):
        return AuditEntry(kind="tool_call", turn_id=run, conversation_id=None,
                          recorded_at=datetime.now(UTC), call_id=call_id, tool="search",
                          checksum="0" * 64, args='{"q":"x"}', decision="allowed")

    async def main():
        sink = PostgresAuditSink(conninfo, chain="killed")
        print("ready", flush=True)
        for i in range(100_000):  # groups of concurrent appends until the kill lands
            batch = [[entry(f"{run}-{i}-{j}-{k}") for k in range(j % 3 + 1)] for j in range(4)]
            await asyncio.gather(*(sink.append(rows) for rows in batch))
            print(" ".join(str(e.call_id) for rows in batch for e in rows), flush=True)

    asyncio.run(main())
    """
)


def test_a_sink_killed_again_and_again_keeps_every_acknowledged_row(pg_conninfo: str) -> None:
    """8 SIGKILLs at random moments of a process appending in groups: the chain verifies,
    every append it saw completed is in it, none twice, and the indexes have no gap."""
    rng = random.Random(32)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    acknowledged: list[str] = []
    for run in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED, pg_conninfo, f"r{run}"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        ready = child.stdout.readline()
        time.sleep(rng.uniform(0.05, 0.4))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=60)
        assert ready == b"ready\n", err.decode(errors="replace")
        assert child.returncode == -signal.SIGKILL
        lines = out.decode().split("\n")[:-1]  # whole lines only: the last may be torn
        acknowledged += [i for line in lines for i in line.split()]
    sink = PostgresAuditSink(pg_conninfo, chain="killed")
    try:
        assert sink.verify()
        rows = sink.rows()
    finally:
        sink.close()
    ids = [str(r.entry.call_id) for r in rows]
    assert [r.index for r in rows] == list(range(len(rows)))
    assert max(Counter(ids).values()) == 1
    assert set(acknowledged) <= set(ids)
    assert len(acknowledged) > 8  # the kills landed while it was appending
