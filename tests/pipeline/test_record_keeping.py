"""Record keepers (`pipeline.stages.RecordKeeper`): told of every change to a turn's stored
calls, their records written before the store's write (a durable store), inside its transaction
(a `JointStore` on the keeper's database), or awaited at the turn's end (a store that is not
durable); a failing keeper is reported and never stops the store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.durable._steps import DurableStore
from pipeline.events import Log, ToolCallStored
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext, JointRecordKeeper, MiddlewareSpec, RecordChange, RecordKeeper
from pipeline.stores import JointStore, MemoryStore, SqliteStore, TransactionWriter
from pipeline.stores._store import is_durable
from pipeline.testing import ScriptedModel


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"results for {q}"


def step(*ids: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=[ProposedToolCall(id=i, name="search", arguments=json.dumps({"q": i}))
                    for i in ids]
    )


class Keeper:
    """Records what it is told and when its write finishes (after ``delay`` seconds)."""

    def __init__(self, log: list[tuple[str, ...]], *, delay: float = 0.0, fail: bool = False):
        self.log = log
        self.delay = delay
        self.fail = fail
        self.changes: list[RecordChange] = []

    def keep(self, change: RecordChange) -> Awaitable[object]:
        self.changes.append(change)
        self.log.append(("keep", change.action, change.call.id))
        return asyncio.ensure_future(self._write(change))

    async def _write(self, change: RecordChange) -> None:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise OSError("disk full")
        self.log.append(("kept", change.action, change.call.id))


class LoggingStore(MemoryStore):
    """A store that logs its call writes and says it is durable."""

    durable = True  # the point of this double

    def __init__(self, log: list[tuple[str, ...]]) -> None:
        super().__init__()
        self.log = log

    async def save_tool_call(self, conversation_id: str | None, turn_id: str,
                             call: ToolCall) -> None:
        self.log.append(("save", call.id))
        await super().save_tool_call(conversation_id, turn_id, call)

    async def delete_tool_call(self, conversation_id: str | None, turn_id: str,
                               call_id: str) -> bool:
        self.log.append(("delete", call_id))
        return await super().delete_tool_call(conversation_id, turn_id, call_id)


class Provider:
    """Middleware as the core sees it: specs (``pipeline.stages.MiddlewareProvider``)."""

    def __init__(self, *specs: MiddlewareSpec) -> None:
        self.specs = specs

    def middleware_specs(self) -> Sequence[MiddlewareSpec]:
        return self.specs


def runner(keepers: Sequence[object], steps: list[ModelResponse], **options: Any) -> TurnRunner:
    middleware = [*keepers, *options.pop("middleware", ())]
    return TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[search],
                      middleware=middleware, **options)


def test_the_protocols_recognise_keepers() -> None:
    """A class with ``keep`` is a RecordKeeper; one with ``joins`` and ``joint`` too joins."""
    assert isinstance(Keeper([]), RecordKeeper)
    assert not isinstance(Keeper([]), JointRecordKeeper)
    assert isinstance(SideTableKeeper(Path("x")), JointRecordKeeper)
    assert not isinstance(object(), RecordKeeper)


async def test_a_keeper_is_told_of_every_stored_amended_and_deleted_call() -> None:
    """Stored, amended (with the record replaced) and deleted calls reach the keeper, in order,
    with the turn and conversation they belong to."""
    log: list[tuple[str, ...]] = []
    keeper = Keeper(log)

    async def edit(ctx: DispatchContext, call_next: CallNext) -> None:
        first, second = ctx.new_tool_calls
        await ctx.mutate_tool_call(ToolCall.completed(id=first.id, tool=first.tool, args={},
                                                      results="edited"))
        await ctx.delete_tool_call(second.id)
        await call_next()

    editor = Provider(MiddlewareSpec("dispatch_output", "editor", edit))
    result = await runner([keeper], [step("a", "b")], middleware=[editor]).run(
        "go", conversation_id="conv"
    )
    assert [(c.action, c.call.id) for c in keeper.changes] == [
        ("stored", "a"), ("stored", "b"), ("amended", "a"), ("deleted", "b")
    ]
    stored_a, _, amended, deleted = keeper.changes
    assert amended.previous is stored_a.call
    assert amended.call.results == "edited"
    assert deleted.call.id == "b"
    assert deleted.previous is None
    assert {(c.turn_id, c.conversation_id) for c in keeper.changes} == {
        (result.turn_id, "conv")
    }


async def test_with_a_durable_store_the_record_is_written_before_the_store_write() -> None:
    """Write-ahead: the store's write of a call begins only once the keeper's record is kept,
    so a kill in between never leaves a stored call without its record."""
    log: list[tuple[str, ...]] = []
    store = LoggingStore(log)
    await runner([Keeper(log, delay=0.01)], [step("a"), step("b")], store=store).run(
        "go", conversation_id="c"
    )
    assert [entry for entry in log if entry[-1] in ("a", "b")] == [
        ("keep", "stored", "a"), ("kept", "stored", "a"), ("save", "a"),
        ("keep", "stored", "b"), ("kept", "stored", "b"), ("save", "b"),
    ]


async def test_with_a_store_that_is_not_durable_the_turn_waits_only_at_its_end() -> None:
    """MemoryStore keeps nothing past the process: the call is stored without waiting for its
    record, and run() returns only after the record was kept."""
    log: list[tuple[str, ...]] = []
    turn = runner([Keeper(log, delay=0.05)], [step("a")])
    turn.on(ToolCallStored, lambda event: log.append(("stored event", event.call.id)))
    await turn.run("go", conversation_id="c")
    assert log == [("keep", "stored", "a"), ("stored event", "a"), ("kept", "stored", "a")]


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "memory"])
async def test_a_failing_keeper_is_reported_and_the_call_is_still_stored(durable: bool) -> None:
    """A keeper whose write fails: a ``record_error`` warning names it and the call; the turn
    completes with the call stored."""
    log: list[tuple[str, ...]] = []
    store = LoggingStore(log) if durable else MemoryStore()
    turn = runner([Keeper(log, fail=True)], [step("a")], store=store)
    warnings: list[Log] = []
    turn.on(Log, warnings.append)
    result = await turn.run("go", conversation_id="c")
    assert result.status == "completed"
    assert [c.id for c in result.tool_calls] == ["a"]
    [warning] = [w for w in warnings if w.kind == "record_error"]
    assert warning.level == "warning"
    assert warning.payload["call_id"] == "a"
    assert warning.payload["keeper"] == "Keeper"
    assert "disk full" in warning.message
    if durable:
        assert ("save", "a") in log


class SideTable:
    """A `TransactionWriter` that inserts a call id into ``records`` with the store's cursor."""

    def __init__(self, call_id: str, settled: list[tuple[str, bool]], *, fail: bool) -> None:
        self.call_id = call_id
        self.settled = settled
        self.fail = fail

    def write(self, connection: object) -> None:
        assert isinstance(connection, sqlite3.Cursor)
        connection.execute("INSERT INTO records VALUES (?)", (self.call_id,))
        if self.fail:
            raise RuntimeError("the record cannot be written")

    def settle(self, committed: bool) -> None:
        self.settled.append((self.call_id, committed))


class SideTableKeeper:
    """A `JointRecordKeeper` writing into the table ``records`` of the store's file."""

    def __init__(self, path: Path, *, fail_for: str | None = None) -> None:
        self.database = "sqlite:" + str(path.resolve())
        self.fail_for = fail_for
        self.settled: list[tuple[str, bool]] = []
        self.kept: list[str] = []

    def keep(self, change: RecordChange) -> Awaitable[object]:
        self.kept.append(change.call.id)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def joins(self, database: str) -> bool:
        return database == self.database

    def joint(self, change: RecordChange) -> TransactionWriter:
        return SideTable(change.call.id, self.settled, fail=change.call.id == self.fail_for)


def _records(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        found = [r[0] for r in conn.execute("SELECT call_id FROM records ORDER BY rowid")]
    conn.close()
    return found


@pytest.mark.parametrize("wrapped", [False, True], ids=["sqlite", "durable-wrapper"])
async def test_a_joint_keeper_writes_in_the_sqlite_stores_transaction(
    tmp_path: Path, wrapped: bool
) -> None:
    """SqliteStore (also wrapped as a durable turn wraps it) runs the keeper's writer in the
    transaction of the call's write: both are committed, and the writer is told so; nothing
    goes through ``keep``."""
    path = tmp_path / "store.sqlite"
    keeper = SideTableKeeper(path)
    async with SqliteStore(path, synchronous="normal") as store:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE records (call_id TEXT)")
        conn.close()
        assert isinstance(store, JointStore)
        assert store.transaction_database == keeper.database
        used: JointStore = DurableStore(store) if wrapped else store
        await runner([keeper], [step("a"), step("b")], store=used).run("go")
    assert _records(path) == ["a", "b"]
    assert keeper.settled == [("a", True), ("b", True)]
    assert keeper.kept == []


async def test_a_failing_joint_writer_rolls_the_calls_write_back_with_it(
    tmp_path: Path,
) -> None:
    """One transaction: a writer that raises leaves neither its row nor the call stored, and
    is told the transaction did not commit."""
    path = tmp_path / "store.sqlite"
    keeper = SideTableKeeper(path, fail_for="b")
    async with SqliteStore(path, synchronous="normal") as store:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE records (call_id TEXT)")
        conn.close()
        result = await runner([keeper], [step("a"), step("b")], store=store).run("go")
        stored = [c.id for c in await store.tool_calls_for_turn(result.turn_id)]
    assert result.status == "failed"
    assert stored == ["a"]
    assert _records(path) == ["a"]
    assert ("a", True) in keeper.settled
    assert ("b", False) in keeper.settled
    assert ("b", True) not in keeper.settled


async def test_a_keeper_on_another_database_writes_ahead_of_a_joint_store(
    tmp_path: Path,
) -> None:
    """A JointRecordKeeper that does not join the store's database is a write-ahead keeper."""
    keeper = SideTableKeeper(tmp_path / "elsewhere.sqlite")
    async with SqliteStore(tmp_path / "store.sqlite", synchronous="normal") as store:
        await runner([keeper], [step("a")], store=store).run("go")
    assert keeper.kept == ["a"]
    assert keeper.settled == []


@pytest.mark.parametrize(
    ("make", "durable"),
    [
        (lambda tmp: MemoryStore(), False),
        (lambda tmp: SqliteStore(":memory:"), False),
        (lambda tmp: SqliteStore(tmp / "s.sqlite"), True),
        (lambda tmp: object(), True),
        (lambda tmp: DurableStore(MemoryStore()), False),
        (lambda tmp: DurableStore(SqliteStore(tmp / "d.sqlite")), True),
    ],
    ids=["memory", "sqlite-memory", "sqlite-file", "unknown", "durable-memory", "durable-file"],
)
def test_which_stores_are_durable(make: Any, durable: bool, tmp_path: Path) -> None:
    """Only a store that says ``durable = False`` (or wraps one) is taken to lose its writes;
    a store that does not say is durable."""
    store = make(tmp_path)
    try:
        assert is_durable(store) is durable
    finally:
        close = getattr(store, "close", None) or getattr(getattr(store, "store", None),
                                                         "close", None)
        if callable(close):
            close()


def test_a_durable_wrapper_shares_its_stores_transactions(tmp_path: Path) -> None:
    """DurableStore names the database of the store it wraps (none for a MemoryStore)."""
    inner = SqliteStore(tmp_path / "s.sqlite")
    try:
        assert DurableStore(inner).transaction_database == inner.transaction_database
        assert inner.transaction_database == "sqlite:" + str((tmp_path / "s.sqlite").resolve())
        assert DurableStore(MemoryStore()).transaction_database is None
        assert SqliteStore(":memory:").transaction_database is None
    finally:
        inner.close()


class Careless:
    """A keeper that raises, or returns no awaitable, instead of writing."""

    def __init__(self, how: str) -> None:
        self.how = how

    def keep(self, change: RecordChange) -> Awaitable[object]:
        if self.how == "raises":
            raise RuntimeError("no disk")
        return None  # type: ignore[return-value]  # the bug this test is about


@pytest.mark.parametrize("how", ["raises", "returns-none"])
@pytest.mark.parametrize("durable", [True, False], ids=["durable", "memory"])
async def test_a_keeper_that_breaks_its_contract_is_reported_and_never_fails_the_turn(
    how: str, durable: bool
) -> None:
    """``keep`` raising, or returning something that cannot be awaited: a ``record_error``
    warning, and the turn completes with its call stored."""
    store = LoggingStore([]) if durable else MemoryStore()
    turn = runner([Careless(how)], [step("a")], store=store)
    warnings: list[Log] = []
    turn.on(Log, warnings.append)
    result = await turn.run("go", conversation_id="c")
    assert result.status == "completed"
    assert [c.id for c in result.tool_calls] == ["a"]
    assert [w.payload["keeper"] for w in warnings if w.kind == "record_error"] == ["Careless"]
