"""A conversation's kept counts (`HistoryStore.load_history`) against a full recount, per store.

Every store keeps a conversation's counts as it writes (``pipeline/stores/_conversation.py``,
``_history_index.py``); a turn starts from them instead of counting every stored call. These
tests hold the kept counts to what counting the records says, after random writes, replaced
and deleted calls, other writers on the same database, and a migrated old database; and the
policies that read them (repetition, conversation-scoped limits) to the same handler runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from middleware import RepetitionDetector, ToolCallLimit
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.errors import StoreError
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stores import (
    ConversationHistory,
    HistoryStore,
    LazyRecords,
    MemorySpoolStore,
    MemoryStore,
    PostgresStore,
    SqliteStore,
)
from pipeline.testing import ScriptedModel

Op = tuple[str, int, int, int, int]
"""(action, turn, call id, checksum, validated): a write to one conversation."""

OPS = st.lists(
    st.tuples(
        st.sampled_from(["save", "save", "save", "delete", "message"]),
        st.integers(0, 3),
        st.integers(0, 6),
        st.integers(0, 4),
        st.integers(-1, 2),
    ),
    max_size=30,
)


def cid(n: int) -> str:
    """Call id ``n``; the last one holds a lone surrogate (SQLite stores such text as bytes)."""
    return f"call_{n}" if n < 6 else f"call_\udc80{n}"


def a_call(call_id: int, checksum: int, validated: int) -> ToolCall:
    """A completed call whose checksum (and validated checksum, -1: none) we choose."""
    call = ToolCall.completed(id=cid(call_id), tool="t", args={"k": checksum}, results="ok")
    return call if validated < 0 else replace(call, validated_checksum=f"{validated:064x}")


async def apply(store: Any, conversation: str, ops: list[Op]) -> None:
    """Write ``ops`` to ``store`` (a turn's calls keyed by turn and id, as turns write them)."""
    for action, turn, call_id, checksum, validated in ops:
        turn_id = f"turn_{turn}"
        if action == "save":
            await store.save_tool_call(conversation, turn_id, a_call(call_id, checksum, validated))
        elif action == "delete":
            await store.delete_tool_call(conversation, turn_id, cid(call_id))
        else:
            message = Message(role="user", content=f"turn {turn}", id=f"m{call_id}")
            await store.save_message(conversation, turn_id, message)  # replaced by id


async def assert_recounted(store: Any, conversation: str) -> None:
    """The kept history equals counting the records ``load_conversation`` returns."""
    messages, calls = await store.load_conversation(conversation)
    assert isinstance(store, HistoryStore)
    kept = await store.load_history(conversation)
    counted = ConversationHistory.of_records(messages, calls)
    assert dict(kept.checksums) == dict(counted.checksums)
    assert dict(kept.validated) == dict(counted.validated)
    ids = {cid(n) for n in range(7)} | {"never"}
    assert {i for i in ids if i in kept.call_ids} == {i for i in ids if i in counted.call_ids}
    assert list(kept.messages) == list(messages)
    assert list(kept.calls) == list(calls)


_FEW = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FEW
@given(ops=OPS, cut=st.integers(0, 30))
async def test_memory_store_counts_equal_a_recount(ops: list[Op], cut: int) -> None:
    """Random saves, replacements and deletes: after each batch the kept counts are a recount."""
    store = MemoryStore()
    await apply(store, "c", ops[:cut])
    await assert_recounted(store, "c")
    await apply(store, "c", ops[cut:])
    await assert_recounted(store, "c")


@_FEW
@given(ops=OPS, cut=st.integers(0, 30))
async def test_sqlite_counts_equal_a_recount_with_two_writers(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], cut: int
) -> None:
    """Two stores on one file (two processes' caches): each reads what the other wrote."""
    path = tmp_path_factory.mktemp("h") / "h.db"
    async with SqliteStore(path) as one, SqliteStore(path) as two:
        await apply(one, "c", ops[:cut])
        await assert_recounted(one, "c")
        await assert_recounted(two, "c")
        await apply(two, "c", ops[cut:])
        await assert_recounted(one, "c")  # its cache moves on by the rows two changed
        await apply(one, "c", ops[: cut // 2])
        await assert_recounted(two, "c")
        await assert_recounted(one, "c")


@pytest.fixture
async def pg_stores(pg_conninfo: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one PostgreSQL database (each with its own cache)."""
    spool = MemorySpoolStore()
    async with (
        PostgresStore(pg_conninfo, spool=spool) as one,
        PostgresStore(pg_conninfo, spool=spool) as two,
    ):
        yield one, two


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, cut=st.integers(0, 30), name=st.uuids())
async def test_postgres_counts_equal_a_recount_with_two_writers(
    pg_stores: tuple[PostgresStore, PostgresStore], ops: list[Op], cut: int, name: Any
) -> None:
    """As for SQLite: two stores on one database, each reading the other's writes."""
    one, two = pg_stores
    conversation = str(name)
    await apply(one, conversation, ops[:cut])
    await assert_recounted(two, conversation)
    await apply(two, conversation, ops[cut:])
    await assert_recounted(one, conversation)
    await assert_recounted(two, conversation)


async def test_a_version_7_sqlite_database_reads_its_history_counted(tmp_path: Path) -> None:
    """A database from before the kept counts (schema 7) is counted when it is migrated."""
    path = tmp_path / "v7.db"
    ops: list[Op] = [("save", t, i, i % 3, i % 2) for t in range(3) for i in range(5)]
    ops += [("delete", 1, 2, 0, 0), ("message", 0, 1, 0, 0)]
    async with SqliteStore(path) as store:
        await apply(store, "old", ops)
        await apply(store, "other", ops[:4])
    with sqlite3.connect(path) as conn:  # what schema 7 held
        conn.execute("DROP TABLE conversations")
        conn.execute("DROP TABLE conversation_counts")
        conn.execute("DELETE FROM schema_migrations WHERE version = 8")
    conn.close()
    async with SqliteStore(path) as store:
        await assert_recounted(store, "old")
        await assert_recounted(store, "other")
        history = await store.load_history("old")
        assert sum(history.checksums.values()) == 14  # 15 saved, one deleted
        await apply(store, "old", [("save", 5, 9, 1, 1)])  # counted on top of the backfill
        await assert_recounted(store, "old")


async def test_a_version_5_postgres_database_reads_its_history_counted(pg_conninfo: str) -> None:
    """As for SQLite: a schema-5 database is counted by the migration to 6."""
    ops: list[Op] = [("save", t, i, i % 3, i % 2) for t in range(3) for i in range(5)]
    ops += [("delete", 1, 2, 0, 0)]
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
        await apply(store, "old", ops)
    with psycopg.connect(pg_conninfo) as conn:  # what schema 5 held
        conn.execute("DROP TABLE loopware.conversations")
        conn.execute("DROP TABLE loopware.conversation_counts")
        conn.execute("DROP INDEX loopware.messages_by_scope")
        conn.execute("DROP INDEX loopware.tool_calls_by_scope")
        conn.execute("DELETE FROM loopware.schema_migrations WHERE version = 6")
    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
        await assert_recounted(store, "old")
        await apply(store, "old", [("save", 5, 9, 1, 1), ("delete", 0, 0, 0, 0)])
        await assert_recounted(store, "old")


# -- the records: loaded when read, never when not ---------------------------------------------
def check_the_history(seen: list[int]) -> Callable[[DispatchContext], Any]:
    """An executor that stores one call and records how much history it could read."""

    async def executor(ctx: DispatchContext) -> None:
        seen.append(len(ctx.history_tool_calls))
        call = ToolCall.completed(id=f"call_{len(seen)}", tool="t", args={}, results="ok")
        await ctx.store_tool_call(call)
        ctx.ack()

    return executor


async def test_sqlite_history_loads_when_read_and_reads_as_of_the_turn_start(
    tmp_path: Path,
) -> None:
    """``ctx.history_tool_calls`` loads the earlier turns' calls, not the turn's own."""
    seen: list[int] = []
    async with SqliteStore(tmp_path / "s.db") as store:
        runner = TurnRunner(executor=check_the_history(seen), store=store)
        for _ in range(3):
            assert (await runner.run("go", conversation_id="c")).status == "completed"
        history = await store.load_history("c")
    assert seen == [0, 1, 2]
    assert isinstance(history.calls, LazyRecords)
    assert not history.calls.loaded
    with pytest.raises(StoreError, match="closed"):
        len(history.calls)  # the store is closed: reading fails typed, not with sqlite3's


async def test_a_replaying_executor_never_loads_the_records(tmp_path: Path) -> None:
    """An executor that reads no history leaves the lazy records unloaded (nothing read)."""
    loaded: list[bool] = []

    async def executor(ctx: DispatchContext) -> None:
        call = ToolCall.completed(id=f"x{len(loaded)}", tool="t", args={}, results="ok")
        await ctx.store_tool_call(call)
        history = ctx.history_tool_calls
        loaded.append(isinstance(history, LazyRecords) and history.loaded)
        ctx.ack()

    async with SqliteStore(tmp_path / "r.db") as store:
        runner = TurnRunner(executor=executor, store=store)
        for _ in range(3):
            assert (await runner.run("go", conversation_id="c")).status == "completed"
    assert loaded == [False, False, False]


# -- the policies that read the counts, against a hostile model --------------------------------
def flood(n: int, turn: int) -> list[ModelResponse]:
    """A model that asks for the same refund ``n`` times in a batch, then again, then stops."""
    same = '{"order": "A-1"}'
    batch = [ProposedToolCall(id=f"t{turn}_{i}", name="refund", arguments=same) for i in range(n)]
    again = [ProposedToolCall(id=f"t{turn}_again", name="refund", arguments=same)]
    return [
        ModelResponse(tool_calls=batch),
        ModelResponse(tool_calls=again),
        ModelResponse(text="done"),
    ]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_repetition_and_a_conversation_limit_hold_across_turns(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Five turns of floods: the conversation limit lets 3 refunds run in all, and repetition
    (threshold 2, counted over the conversation) lets the same refund run at most once more
    than the earlier turns' count allows: real handler runs are counted."""
    runs: list[str] = []

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        runs.append(order)
        return "refunded"

    store: Any
    if kind == "memory":
        store = MemoryStore()
    elif kind == "sqlite":
        store = SqliteStore(tmp_path / "p.db")
    else:
        store = PostgresStore(request.getfixturevalue("pg_conninfo"), spool=MemorySpoolStore())
    try:
        refused = 0
        for turn in range(5):
            runner = TurnRunner(
                executor=ToolLoopExecutor(ScriptedModel(flood(4, turn))),
                tools=[refund],
                middleware=[ToolCallLimit({"refund": 3}, scope="conversation")],
                store=store,
            )
            result = await runner.run("refund", conversation_id="conv")
            assert result.status == "completed"
            refused += sum(1 for c in result.tool_calls if not c.ran)
        assert len(runs) == 3  # the conversation's limit, whatever the turns asked
        repeat_runs: list[str] = []

        @tool
        def lookup(q: str) -> str:
            """Look something up."""
            repeat_runs.append(q)
            return "found"

        for turn in range(4):
            ask = ProposedToolCall(id=f"q{turn}", name="lookup", arguments='{"q": "x"}')
            model = ScriptedModel([ModelResponse(tool_calls=[ask]), ModelResponse(text="done")])
            runner = TurnRunner(
                executor=ToolLoopExecutor(model),
                tools=[lookup],
                middleware=[RepetitionDetector(threshold=3)],
                store=store,
            )
            await runner.run("look", conversation_id="conv")
        assert len(repeat_runs) == 2  # the third identical call, in a later turn, is denied
        assert refused == 5 * 5 - 3  # every other call of the 5 turns was refused
    finally:
        if hasattr(store, "aclose"):
            await store.aclose()


class Recording:
    """A model that answers at once and notes what each request held of the conversation."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    async def complete(self, request: Any) -> ModelResponse:
        self.seen.append((len(request.messages), len(request.tool_calls)))
        return ModelResponse(text="ok")


async def test_the_model_reads_the_whole_conversation_loaded_off_the_loop(
    tmp_path: Path,
) -> None:
    """ToolLoopExecutor awaits ``ctx.load_history()``: the request holds every earlier message,
    and the records were loaded in a worker thread before the request was built."""
    model = Recording()
    loaded: list[bool] = []

    async def note(ctx: DispatchContext) -> None:
        before = ctx.history_tool_calls
        await ToolLoopExecutor(model)(ctx)
        loaded.append(not isinstance(before, LazyRecords) or before.loaded)

    async with SqliteStore(tmp_path / "m.db") as store:
        await store.save_tool_call("c", "t0", a_call(0, 0, -1))
        runner = TurnRunner(executor=note, store=store)
        for _ in range(3):
            assert (await runner.run("hello", conversation_id="c")).status == "completed"
    assert model.seen == [(1, 1), (3, 1), (5, 1)]  # user + answer per turn, the stored call
    assert loaded == [True, True, True]
