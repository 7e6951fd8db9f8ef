"""`PostgresStore` specifics: options, schema, connection errors, life cycle, many processes.

The behaviour it shares with `SqliteStore` is pinned by the parametrised store suites
(``test_store.py``, ``test_store_durable.py``); these are the parts only PostgreSQL has.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from pipeline import ToolLoopExecutor, TurnRunner
from pipeline.calls import ToolCall
from pipeline.errors import InvalidRunnerConfigError
from pipeline.models import ModelResponse
from pipeline.stores import FileSpoolStore, MemorySpoolStore, PostgresStore
from pipeline.testing import ScriptedModel

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra: postgres)")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"conninfo": ""}, "conninfo"),
        ({"conninfo": 5}, "conninfo"),
        ({"spool": "dir"}, "spool"),
        ({"min_size": -1}, "min_size"),
        ({"max_size": 0}, "max_size"),
        ({"min_size": 5, "max_size": 2}, "max_size"),
        ({"max_size": True}, "max_size"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
    ],
    ids=["empty", "int", "spool", "min", "max-zero", "max-below-min", "bool-max", "timeout",
         "nan-timeout"],
)
def test_bad_options_raise_invalid_runner_config(kwargs: dict[str, object], problem: str) -> None:
    """Each bad option is named in an InvalidRunnerConfigError before anything connects."""
    options: dict[str, object] = {"conninfo": "dbname=x", "spool": MemorySpoolStore(), **kwargs}
    with pytest.raises(InvalidRunnerConfigError, match=problem):
        PostgresStore(**options)  # type: ignore[arg-type]


async def test_an_unreachable_server_is_a_config_error_without_the_password(
    tmp_path: Path,
) -> None:
    """A server that cannot be reached raises InvalidRunnerConfigError; the password is hidden."""
    conninfo = f"host={tmp_path} port=1 dbname=x user=u password=hunter2 connect_timeout=1"
    store = PostgresStore(conninfo, spool=MemorySpoolStore(), timeout=1)
    with pytest.raises(InvalidRunnerConfigError, match="cannot open") as info:
        await store.open()
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(store)


async def test_newer_schema_is_refused(pg_conninfo: str) -> None:
    """A database migrated by a newer loopware raises InvalidRunnerConfigError, untouched."""
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()):
        pass
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute("INSERT INTO loopware.schema_migrations (version) VALUES (99)")
    store = PostgresStore(pg_conninfo, spool=MemorySpoolStore())
    with pytest.raises(InvalidRunnerConfigError, match="schema version 99"):
        await store.open()
    with psycopg.connect(pg_conninfo) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM loopware.schema_migrations")]
    assert versions == [1, 2, 3, 4, 5, 6, 99]


async def test_workers_opening_a_new_database_together_migrate_it_once(pg_conninfo: str) -> None:
    """Eight stores opening one empty database at once all succeed; the schema is made once."""
    stores = [PostgresStore(pg_conninfo, spool=MemorySpoolStore()) for _ in range(8)]
    await asyncio.gather(*(store.open() for store in stores))
    await asyncio.gather(*(store.aclose() for store in stores))
    with psycopg.connect(pg_conninfo) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM loopware.schema_migrations")]
    assert versions == [1, 2, 3, 4, 5, 6]


async def test_the_first_operation_opens_and_a_closed_store_refuses_work(
    pg_conninfo: str,
) -> None:
    """Using a store without open() connects it; after aclose() every operation raises."""
    store = PostgresStore(pg_conninfo, spool=MemorySpoolStore())
    assert "new" in repr(store)
    await store.save_tool_call(None, "t", ToolCall.completed(id="a", tool="x", args={},
                                                             results="r"))
    assert "open" in repr(store)
    await store.aclose()
    await store.aclose()  # idempotent
    assert "closed" in repr(store)
    with pytest.raises(RuntimeError, match="closed"):
        await store.tool_calls_for_turn("t")


def test_one_store_serves_turns_on_different_event_loops(pg_conninfo: str) -> None:
    """Each run_sync has its own event loop; one store serves them all, then closes."""
    store = PostgresStore(pg_conninfo, spool=MemorySpoolStore(), max_size=2)
    for i in range(3):
        runner = TurnRunner(
            executor=ToolLoopExecutor(ScriptedModel([ModelResponse(text=f"answer {i}")])),
            store=store,
        )
        assert runner.run_sync(f"question {i}", conversation_id="c").status == "completed"
    messages, _ = asyncio.run(store.load_conversation("c"))
    store.close()
    store.close()  # idempotent
    assert [m.content for m in messages] == [
        "question 0", "answer 0", "question 1", "answer 1", "question 2", "answer 2"
    ]


async def test_a_write_whose_caller_was_cancelled_still_commits(pg_conninfo: str) -> None:
    """Cancelling the task that is saving a call stops the wait, never the write."""
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
        saving = asyncio.create_task(store.save_tool_call(
            "c", "t", ToolCall.completed(id="a", tool="x", args={}, results="kept")))
        await asyncio.sleep(0)  # the write is on its way
        saving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await saving
        calls: Sequence[ToolCall] = ()
        for _ in range(100):  # the write finishes on the store's own loop
            _, calls = await store.load_conversation("c")
            if calls:
                break
            await asyncio.sleep(0.01)
    assert [c.results for c in calls] == ["kept"]


async def test_tables_live_in_their_own_schema(pg_conninfo: str) -> None:
    """The store's tables are in schema ``loopware``; the public schema stays empty."""
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()):
        pass
    with psycopg.connect(pg_conninfo) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema IN ('public', 'loopware') ORDER BY table_name"
        ).fetchall()
    assert {schema for schema, _ in tables} == {"loopware"}
    assert {name for _, name in tables} >= {"turns", "messages", "tool_calls",
                                            "tool_call_results", "schema_migrations"}


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pipeline.calls import ToolCall
    from pipeline.stores import FileSpoolStore, PostgresStore

    async def main() -> None:
        conninfo, spool_dir, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
        async with PostgresStore(conninfo, spool=FileSpoolStore(spool_dir), max_size=2) as store:
            for i in range(50):
                await store.save_tool_call("shared", f"turn-{worker}", ToolCall.completed(
                    id=f"c{i}", tool="echo", args={"i": i}, results=f"worker {worker} call {i}"))
    asyncio.run(main())
    """
)


async def test_four_processes_share_one_conversation_and_lose_nothing(
    pg_conninfo: str, tmp_path: Path
) -> None:
    """Four OS processes writing one conversation at once leave all 200 calls, each once."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    spool = tmp_path / "spool"
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, pg_conninfo, str(spool), str(w), env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for w in range(4)
    ]
    for child in children:
        _, err = await child.communicate()
        assert child.returncode == 0, err.decode()
    async with PostgresStore(pg_conninfo, spool=FileSpoolStore(spool)) as store:
        _, calls = await store.load_conversation("shared")
    assert len(calls) == 200
    for worker in range(4):
        mine = [c for c in calls if str(c.results).startswith(f"worker {worker} ")]
        assert [c.args["i"] for c in mine] == list(range(50))
        assert [c.id for c in mine] == [f"c{i}" for i in range(50)]


async def test_connections_the_server_dropped_are_replaced_without_an_error(
    pg_conninfo: str,
) -> None:
    """After the server ends every connection (a restart), the next operations just work."""
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore(), min_size=2) as store:
        await store.save_tool_call("c", "t", ToolCall.completed(id="a", tool="x", args={},
                                                                results="before"))
        with psycopg.connect(pg_conninfo, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert ended is not None
        assert ended[0] >= 1
        await store.save_tool_call("c", "t", ToolCall.completed(id="b", tool="x", args={},
                                                                results="after"))
        _, calls = await store.load_conversation("c")
    assert [c.results for c in calls] == ["before", "after"]
