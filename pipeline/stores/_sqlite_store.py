"""`SqliteStore`: the embedded, durable `TurnStore` (stdlib ``sqlite3`` on one worker thread).

Why a worker thread and not aiosqlite: aiosqlite is exactly "one thread per connection and a
queue", which a one-thread `ThreadPoolExecutor` gives us from the standard library with no extra
dependency. Every database call of a store runs on that thread over one connection, so writes
are serialised in submission order, the event loop never blocks on disk, and concurrent turns in
one process can never see ``database is locked`` from each other. ``busy_timeout`` covers other
processes (or other stores) using the same file.

Durability: the database runs in WAL mode and every write is one ``BEGIN IMMEDIATE ... COMMIT``
transaction that has committed before the coroutine returns. With ``synchronous="full"`` (the
default) a commit also survives an OS crash or power loss; ``"normal"`` survives the process
being killed at any point, and is several times faster.

Artifact bodies are kept by reference: a result part records the spool key of its body in the
store's spool (by default a `FileSpoolStore` in ``<path>-spool`` beside the database), never the
body itself, so storing or loading a 200 MB result does not hold it in memory (see
`pipeline.stores._body_refs`).

Other writers' writes can share a call's transaction (`JointStore`): ``save_tool_call`` and
``delete_tool_call`` run their ``writers`` (an audit sink on the same file) with the
transaction's cursor, on the worker thread, before the commit.

Messages are keyed by (conversation, id) inside a conversation, and tool calls by
(conversation, turn, id), as `MemoryStore` keys them: concurrent turns of one conversation may
store the same provider id and neither call is lost. Turns without a conversation are stored
too, keyed by turn, so that they can be audited or recovered (`tool_calls_for_turn`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Self, TypeVar

from ..errors import InvalidRunnerConfigError, StoreError
from . import _sqlite_counters as slots_sql
from . import _sqlite_sql as sql
from ._body_refs import is_owned, owned_key, reference_body
from ._conversation import ConversationHistory, reads_its_own_way
from ._file_spool import FileSpoolStore
from ._history_index import IndexCache, call_keys
from ._spool import MemorySpoolStore, SpoolStore
from ._sqlite_bodies import externalise_bodies
from ._sqlite_codec import (
    encode_call,
    encode_message,
    encode_turn,
    from_sql_text,
    sql_text,
    turn_from_row,
)
from ._sqlite_history import count_call, read_history
from ._sqlite_schema import migrate

if TYPE_CHECKING:
    from ..artifacts._artifact import SpooledArtifact
    from ..calls._toolcall import ToolCall
    from ..models._message import Message
    from ._counters import CounterLimit, SlotGrant
    from ._store import TransactionWriter, TurnRecord

__all__ = ["SqliteStore"]

P = ParamSpec("P")
R = TypeVar("R")


def _scope(conversation_id: str | None, turn_id: str) -> str | bytes:
    return sql_text(f"t:{turn_id}" if conversation_id is None else f"c:{conversation_id}")


"""The spool given to rows that reference no body (so reading never creates the default one)."""


def _keys(rows: Iterable[tuple[str | bytes]]) -> list[str]:
    return [from_sql_text(row[0]) for row in rows]


def _ids(conversation_id: str | None, turn_id: str) -> tuple[str | bytes | None, str | bytes]:
    return (None if conversation_id is None else sql_text(conversation_id)), sql_text(turn_id)


class SqliteStore:
    """A `TurnStore` in an SQLite database file (WAL, one transaction per write).

    Args:
        path: The database file (created with its schema when missing; ``":memory:"`` for a
            throw-away store).
        synchronous: ``"full"`` (default: commits survive power loss) or ``"normal"`` (commits
            survive a process kill; faster).
        busy_timeout: Seconds to wait for a lock held by another connection to the same file.
        spool: Where artifact bodies are kept (the database holds their spool keys). Default:
            a `FileSpoolStore` in the directory ``<path>-spool`` (created on the first
            artifact), or a `MemorySpoolStore` for ``":memory:"``. Give the runner the same
            spool and bodies are never copied.

    Raises:
        InvalidRunnerConfigError: a bad option, a file that is not an SQLite database, or a
            database written by a newer loopware (its schema version is too new).

    Use it as an async context manager, or call `close()` / `aclose()` when done.
    """

    __slots__ = ("_closed", "_conn", "_database", "_executor", "_indexes", "_path", "_spool")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["full", "normal"] = "full",
        busy_timeout: float = 30.0,
        spool: SpoolStore | None = None,
    ) -> None:
        """Open (and create or migrate) the database; see the class docstring."""
        bad: list[str] = []
        path_value: object = path
        if not isinstance(path_value, str | os.PathLike) or not os.fspath(path_value):
            bad.append(f"path must be a non-empty str or path, got {path!r}")
        if synchronous not in ("full", "normal"):
            bad.append(f"synchronous must be 'full' or 'normal', got {synchronous!r}")
        timeout: object = busy_timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout < 0
        ):
            bad.append(f"busy_timeout must be a non-negative number, not {busy_timeout!r}")
        if spool is not None and not all(
            callable(getattr(spool, m, None)) for m in ("write", "read", "delete")
        ):
            bad.append(f"spool must implement SpoolStore (write, read, delete), not {spool!r}")
        if bad:
            raise InvalidRunnerConfigError("SqliteStore: " + "; ".join(bad), field="store")
        self._path = os.fspath(path)
        memory = self._path == ":memory:" or self._path.startswith("file::memory:")
        self._database = None if memory else "sqlite:" + os.path.realpath(self._path)
        self._spool: SpoolStore | None = spool
        if spool is None and self._path == ":memory:":
            self._spool = MemorySpoolStore()
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        self._indexes = IndexCache()  # read on the worker thread only
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopware-sqlite")
        try:
            self._executor.submit(self._open, synchronous, busy_timeout).result()
        except (sqlite3.Error, InvalidRunnerConfigError) as exc:
            self._executor.submit(self._close_connection).result()
            self._executor.shutdown(wait=True)
            self._closed = True
            if isinstance(exc, InvalidRunnerConfigError):
                raise
            raise InvalidRunnerConfigError(
                f"SqliteStore: cannot open {self._path!r}: {exc}", field="store"
            ) from exc

    def __repr__(self) -> str:
        """Show the database path and whether the store is open."""
        state = "closed" if self._closed else "open"
        return f"SqliteStore({self._path!r}, {state})"

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def durable(self) -> bool:
        """Whether its writes survive the process: True but for ``":memory:"``."""
        return self._database is not None

    @property
    def transaction_database(self) -> str | None:
        """``"sqlite:"`` and the file's real path (None for ``":memory:"``; see `JointStore`)."""
        return self._database

    @property
    def spool(self) -> SpoolStore:
        """Where the artifact bodies of stored calls are kept."""
        spool = self._spool
        if spool is None:
            spool = self._spool = FileSpoolStore(self._path + "-spool")
        return spool

    # -- life cycle (worker thread) -----------------------------------------------------------
    def _open(self, synchronous: str, busy_timeout: float) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, timeout=busy_timeout)
        self._conn = conn
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        _enter_wal(conn, busy_timeout)
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        previous = self._migrate()  # foreign keys off: a migration may rebuild a table
        conn.execute("PRAGMA foreign_keys = ON")
        if 0 < previous < 3:  # bodies used to live in the rows: stream them to the spool
            externalise_bodies(conn, lambda: self.spool)

    def _migrate(self) -> int:
        with self._transaction() as cur:
            return migrate(cur, self._path)

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def _transaction(self, *, write: bool = True) -> Iterator[sqlite3.Cursor]:
        """Run one transaction.

        Writes use ``BEGIN IMMEDIATE`` (the write lock is taken up front, so ``busy_timeout``
        applies); reads a deferred ``BEGIN`` (one consistent snapshot).
        """
        conn = self._conn
        if conn is None:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield cur
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        cur.execute("COMMIT")

    async def _run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed SqliteStore.")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        """Finish queued work and close the database (idempotent; blocks until done)."""
        if self._closed:
            return
        self._closed = True
        self._executor.submit(self._close_connection).result()
        self._executor.shutdown(wait=True)

    async def aclose(self) -> None:
        """Like `close`, without blocking the event loop."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> Self:
        """Return the open store."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        await self.aclose()

    # -- TurnStore ----------------------------------------------------------------------------
    async def save_turn(self, record: TurnRecord) -> None:
        """Insert or replace a turn's summary (committed before returning)."""
        await self._run(self._write_turn, record)

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Insert or replace a message by id (committed before returning)."""
        await self._run(self._write_message, conversation_id, turn_id, message)

    async def save_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call: ToolCall,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> None:
        """Insert or replace a turn's call by id, keeping its position (committed first).

        ``writers`` run in the same transaction, after the call's rows (see `JointStore`).
        """
        await self._run(self._write_call, conversation_id, turn_id, call, writers)

    async def delete_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call_id: str,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> bool:
        """Delete a turn's call by id (committed before returning); return whether it existed.

        ``writers`` run in the same transaction, after the delete (see `JointStore`).
        """
        return await self._run(
            self._delete_call,
            _scope(conversation_id, turn_id),
            sql_text(turn_id),
            sql_text(call_id),
            writers,
        )

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return the conversation's messages and tool calls, each in storage order."""
        return await self._run(self._read_conversation, _scope(conversation_id, ""))

    async def load_history(self, conversation_id: str) -> ConversationHistory:
        """The conversation's kept counts; its records load when first read (`HistoryStore`)."""
        if reads_its_own_way(self, SqliteStore):  # a subclass's load_conversation answers
            return ConversationHistory.of_records(*await self.load_conversation(conversation_id))
        return await self._run(self._read_history, _scope(conversation_id, ""))

    def _read_history(self, scope: str | bytes) -> ConversationHistory:
        with self._transaction(write=False) as cur:
            return read_history(cur, scope, self._indexes, partial(self._read_upto, scope))

    def _read_upto(self, scope: str | bytes, calls: bool, seq: int) -> list[Any]:
        """A lazy history's records up to ``seq``, read from the reader's thread."""
        if self._closed:
            raise StoreError("the SqliteStore was closed before the history was read")
        read = self._read_calls if calls else self._read_messages
        try:
            return self._executor.submit(
                lambda: read("scope = ? AND seq <= ?", (scope, seq))
            ).result()
        except sqlite3.Error as exc:
            raise StoreError(f"reading the conversation failed: {exc}") from exc

    # -- CounterStore (one BEGIN IMMEDIATE transaction each) -----------------------------------
    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """Reserve ``slot`` under every counter or none (see `CounterStore.reserve_slot`)."""
        return await self._run(self._in_write, slots_sql.reserve, slot, limits, now, ttl)

    async def settle_slot(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """Consume or release ``slot`` (see `CounterStore.settle_slot`)."""
        await self._run(self._in_write, slots_sql.settle, slot, counters, consume, now, amount)

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """What ``counter`` holds at ``now`` (see `CounterStore.count_slots`)."""
        return await self._run(self._in_write, slots_sql.count, counter, window, now)

    def _in_write(self, fn: Callable[..., R], *args: object) -> R:
        """Run ``fn(cursor, *args)`` in one write transaction (on the worker thread)."""
        with self._transaction() as cur:
            return fn(cur, *args)

    # -- reading helpers ------------------------------------------------------------------------
    async def tool_calls_for_turn(self, turn_id: str) -> list[ToolCall]:
        """Return the calls a turn stored (with or without a conversation), in storage order."""
        return await self._run(self._read_calls, "turn_id = ?", (sql_text(turn_id),))

    async def messages_for_turn(self, turn_id: str) -> list[Message]:
        """Return the messages a turn stored, in storage order."""
        return await self._run(self._read_messages, "turn_id = ?", (sql_text(turn_id),))

    async def turn(self, turn_id: str) -> TurnRecord | None:
        """Return a stored turn's summary, if any."""
        return await self._run(self._read_turn, sql_text(turn_id))

    # -- worker-thread bodies -------------------------------------------------------------------
    def _write_turn(self, record: TurnRecord) -> None:
        with self._transaction() as cur:
            cur.execute(sql.TURN_UPSERT, encode_turn(record))

    def _write_message(self, conversation_id: str | None, turn_id: str, message: Message) -> None:
        values = (_scope(conversation_id, turn_id), *_ids(conversation_id, turn_id))
        values += encode_message(message)
        with self._transaction() as cur:
            cur.execute(sql.MESSAGE_UPSERT, values)

    def _write_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call: ToolCall,
        writers: Sequence[TransactionWriter],
    ) -> None:
        def body_key(position: int, artifact: SpooledArtifact) -> str | None:
            return reference_body(
                self.spool,  # the default spool's directory is made on the first artifact
                artifact,
                turn_key=f"{turn_id}/{call.id}",
                own_key=owned_key(conversation_id, turn_id, call.id, position),
            )

        row, parts = encode_call(call, body_key)  # copies bodies: here, off the event loop
        scope = _scope(conversation_id, turn_id)
        ids = _ids(conversation_id, turn_id)
        stale: list[str] = []
        with self._joint_transaction(writers) as cur:
            found = cur.execute(sql.CALL_FIND, (scope, ids[1], row[0])).fetchone()
            if conversation_id is not None:  # its kept counts, in the same transaction
                count_call(cur, scope, None if found is None else found[1:], call_keys(call))
            if found is None:
                cur.execute(sql.CALL_INSERT, (scope, *ids, *row))
                seq = cur.lastrowid
            else:
                seq = found[0]
                stale = _keys(cur.execute(sql.PART_KEYS, (seq,)).fetchall())
                cur.execute(sql.CALL_UPDATE, (*ids, *row[1:], seq))
                cur.execute("DELETE FROM tool_call_results WHERE call_seq = ?", (seq,))
            if parts:
                cur.executemany(sql.PART_INSERT, [(seq, *part) for part in parts])
        kept = {from_sql_text(p[-1]) for p in parts if p[-1] is not None}
        self._forget_bodies(k for k in stale if k not in kept)

    @contextmanager
    def _joint_transaction(self, writers: Sequence[TransactionWriter]) -> Iterator[sqlite3.Cursor]:
        """A write transaction whose ``writers`` run at its end, before the commit.

        Each writer is told how it ended (`TransactionWriter.settle`).
        """
        if not writers:
            with self._transaction() as cur:
                yield cur
            return
        committed = False
        try:
            with self._transaction() as cur:
                yield cur
                for writer in writers:
                    if writer.write(cur) is not None:
                        raise TypeError(
                            f"{writer!r} returned an awaitable: SqliteStore runs a writer on "
                            "its worker thread and cannot await it"
                        )
            committed = True
        finally:
            for writer in writers:
                with contextlib.suppress(Exception):
                    writer.settle(committed)

    def _forget_bodies(self, keys: Iterable[str]) -> None:
        """Delete the bodies this store copied for rows that no longer refer to them."""
        for key in keys:
            if is_owned(key):
                self.spool.delete(key)

    def _delete_call(
        self,
        scope: str | bytes,
        turn_id: str | bytes,
        call_id: str | bytes,
        writers: Sequence[TransactionWriter],
    ) -> bool:
        stale: list[str] = []
        with self._joint_transaction(writers) as cur:
            found = cur.execute(sql.CALL_FIND, (scope, turn_id, call_id)).fetchone()
            if found is not None:
                if from_sql_text(scope).startswith("c:"):  # a conversation's: its counts
                    count_call(cur, scope, found[1:], None)
                stale = _keys(cur.execute(sql.PART_KEYS, (found[0],)).fetchall())
                cur.execute("DELETE FROM tool_calls WHERE seq = ?", (found[0],))
        if found is None:
            return False
        self._forget_bodies(stale)
        return True

    def _read_conversation(self, scope: str | bytes) -> tuple[list[Message], list[ToolCall]]:
        with self._transaction(write=False) as cur:  # one snapshot for both reads
            messages = sql.select_messages(cur, "scope = ?", (scope,))
            calls = sql.select_calls(cur, "scope = ?", (scope,), self._bodies)
        return messages, calls

    def _read_calls(self, where: str, params: tuple[object, ...]) -> list[ToolCall]:
        with self._transaction(write=False) as cur:
            return sql.select_calls(cur, where, params, self._bodies)

    def _read_messages(self, where: str, params: tuple[object, ...]) -> list[Message]:
        with self._transaction(write=False) as cur:
            return sql.select_messages(cur, where, params)

    def _bodies(self) -> SpoolStore:
        return self.spool

    def _read_turn(self, turn_id: str | bytes) -> TurnRecord | None:
        with self._transaction(write=False) as cur:
            row = cur.execute(sql.TURN_SELECT + " WHERE turn_id = ?", (turn_id,)).fetchone()
        return None if row is None else turn_from_row(row)


def _enter_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the database in WAL mode, waiting up to ``busy_timeout`` for other openers.

    Switching a new file to WAL needs the file to itself, and SQLite answers "database is
    locked" at once, without its busy handler, while another process opening the same new file
    holds a lock (creating the schema): so the switch is tried again until the timeout.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)


SqliteStore.__module__ = "pipeline.stores"
