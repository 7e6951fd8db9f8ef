"""`PostgresStore`: the `TurnStore` on PostgreSQL (psycopg 3, async, a connection pool).

Same semantics as `SqliteStore`: messages keyed by (conversation, id), tool calls by
(conversation, turn, id) with a replaced call keeping its place, turns without a conversation
kept under their turn, artifact bodies by reference to a spool store. Every write is one
transaction that has committed before the coroutine returns, so several processes (workers) can
share one database; storage order is the order rows were first inserted.

Other writers' writes can share a call's transaction (`JointStore`): ``save_tool_call`` and
``delete_tool_call`` run their ``writers`` (an audit sink on the same database) with the
transaction's ``psycopg.AsyncConnection``, on the store's event loop, before the commit; the
store names its database (``transaction_database``) once it has connected.

psycopg is imported when the store opens, never by ``import pipeline``: install the extra
``loopware[postgres]``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeAlias, TypeVar

from .._extras import require_extra
from ..errors import InvalidRunnerConfigError, StoreError
from . import _postgres_counters as slots_sql
from . import _postgres_sql as sql
from ._body_refs import is_owned, owned_key, reference_body
from ._conversation import ConversationHistory, LazyRecords, reads_its_own_way
from ._history_index import IndexCache
from ._loop_thread import LoopThread
from ._postgres_history import BUMP, COUNT, count_params, read_index
from ._postgres_schema import migrate
from ._postgres_sql import Row
from ._sqlite_codec import (
    encode_call,
    encode_message,
    encode_turn,
    message_from_row,
    turn_from_row,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

    from ..artifacts._artifact import SpooledArtifact
    from ..calls._toolcall import ToolCall
    from ..models._message import Message
    from ._counters import CounterLimit, SlotGrant
    from ._spool import SpoolStore
    from ._store import TransactionWriter, TurnRecord

    Pool: TypeAlias = AsyncConnectionPool[AsyncConnection[Row]]

__all__ = ["PostgresStore"]

R = TypeVar("R")


class PostgresStore:
    """A `TurnStore` in a PostgreSQL database, shared safely by many processes.

    Args:
        conninfo: A libpq connection string or URL (``"postgresql://user@host/db"``,
            ``"host=/run/postgresql dbname=app"``).
        spool: Where artifact bodies are kept; the database holds their spool keys. Every
            process sharing the database needs the same bodies, so give each a
            `FileSpoolStore` on one shared directory (and the runner the same spool, so bodies
            are never copied).
        min_size: Connections the pool keeps open.
        max_size: The most connections the pool opens.
        timeout: Seconds to wait for a connection (at open and for each operation).

    Raises:
        InvalidRunnerConfigError: a bad option; at `open`, a server that cannot be reached or
            a database written by a newer loopware.

    Use it as an async context manager, or call `open()` (optional: the first operation
    opens it) and `aclose()` / `close()`. It can be used from any event loop (each
    ``run_sync`` has its own): the pool lives on the store's own loop thread.
    """

    __slots__ = (
        "_closed",
        "_conninfo",
        "_database",
        "_indexes",
        "_lock",
        "_max",
        "_min",
        "_opening",
        "_pool",
        "_spool",
        "_thread",
        "_timeout",
    )

    def __init__(
        self,
        conninfo: str,
        *,
        spool: SpoolStore,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 30.0,
    ) -> None:
        """Check the options; nothing connects until `open` (see the class docstring)."""
        sql.check_options(conninfo, spool, min_size, max_size, timeout)
        for module in ("psycopg", "psycopg_pool"):  # found, not imported: it connects later
            require_extra(module, "postgres", "PostgresStore")
        self._conninfo = conninfo
        self._spool = spool
        self._min = min_size
        self._max = max_size
        self._timeout = float(timeout)
        self._pool: Pool | None = None
        self._opening: asyncio.Lock | None = None  # lives on the store's own loop
        self._thread: LoopThread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._database: str | None = None
        self._indexes = IndexCache()  # read on the store's loop only

    durable = True
    """Its writes are committed in PostgreSQL before they return (see `TurnStore`)."""

    def __repr__(self) -> str:
        """Show the server (without a password) and whether the store is open."""
        state = "closed" if self._closed else "open" if self._pool is not None else "new"
        return f"PostgresStore({sql.redact(self._conninfo)!r}, {state})"

    @property
    def spool(self) -> SpoolStore:
        """Where the artifact bodies of stored calls are kept."""
        return self._spool

    @property
    def transaction_database(self) -> str | None:
        """The server, database and user its connections reach, as libpq resolved them.

        ``"postgresql:host=<h> port=<p> dbname=<d> user=<u>"``; None until it has opened.
        """
        return self._database

    # -- life cycle -----------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect the pool and create or migrate the schema (idempotent).

        Raises:
            InvalidRunnerConfigError: the server cannot be reached in ``timeout`` seconds, or
                its schema is newer than this loopware's.
            RuntimeError: the store was closed.
        """
        await self._run(_nothing)

    def _loop_thread(self) -> LoopThread:
        with self._lock:
            if self._closed:
                raise RuntimeError("Cannot operate on a closed PostgresStore.")
            if self._thread is None:
                self._thread = LoopThread("loopware-postgres")
            return self._thread

    async def _run(self, job: Callable[[Pool], Awaitable[R]]) -> R:
        """Run ``job`` with the pool on the store's loop (opening the pool first if needed).

        A job whose connection turns out to be dead (the server restarted, or closed an idle
        connection) is run once more on a fresh one: every job is one transaction of
        idempotent statements (upserts, deletes by key, reads), so running it again is safe.
        """
        return await self._loop_thread().run(self._on_loop(job))

    async def _on_loop(self, job: Callable[[Pool], Awaitable[R]]) -> R:
        import psycopg

        pool = await self._ready()
        try:
            return await job(pool)
        except psycopg.OperationalError:
            await pool.check()  # drop the dead connections before the second attempt
            return await job(pool)

    async def _ready(self) -> Pool:
        """Return the open pool (on the store's loop), opening it once."""
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await self._connect()
            return self._pool

    async def _connect(self) -> Pool:
        import psycopg
        from psycopg_pool import AsyncConnectionPool, PoolTimeout

        where = sql.redact(self._conninfo)
        pool: Pool = AsyncConnectionPool(
            self._conninfo,
            min_size=self._min,
            max_size=self._max,
            timeout=self._timeout,
            kwargs={"autocommit": True},  # a write is one statement or an explicit transaction
            open=False,
            name="loopware-store",
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
            async with pool.connection() as conn:
                await migrate(conn, where)
                info = conn.info
                self._database = (
                    f"postgresql:host={info.host} port={info.port} dbname={info.dbname} "
                    f"user={info.user}"
                )
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise InvalidRunnerConfigError(
                f"PostgresStore: cannot open {where!r}: {exc}", field="store"
            ) from exc
        except BaseException:
            await pool.close()
            raise
        return pool

    def close(self) -> None:
        """Close the pool and stop the store's thread (idempotent; blocks until done).

        Operations afterwards raise `RuntimeError`.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            thread.run_sync(self._close_pool())
        finally:
            thread.stop()

    async def _close_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def aclose(self) -> None:
        """Like `close`, without blocking the event loop."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> Self:
        """Open the store and return it."""
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        await self.aclose()

    # -- TurnStore ------------------------------------------------------------------------------
    async def save_turn(self, record: TurnRecord) -> None:
        """Insert or replace a turn's summary (committed before returning)."""
        values = sql.bytea(encode_turn(record), sql.TURN_BYTEA)
        await self._run(lambda pool: _execute(pool, sql.TURN_UPSERT, values))

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Insert or replace a message by id (committed before returning)."""
        values = [sql.scope(conversation_id, turn_id), sql.opt(conversation_id), sql.b(turn_id)]
        values += sql.bytea(encode_message(message), sql.MESSAGE_BYTEA)
        await self._run(lambda pool: _execute(pool, sql.MESSAGE_UPSERT, values))

    async def save_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call: ToolCall,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> None:
        """Insert or replace a turn's call by id, keeping its position (committed first).

        Artifact bodies the spool does not hold yet are copied into it first (off the event
        loop, streaming), so a committed row never refers to a missing body. ``writers`` run
        in the same transaction, after the call's rows (see `JointStore`).
        """
        spool = self._spool

        def body_key(position: int, artifact: SpooledArtifact) -> str | None:
            return reference_body(
                spool,
                artifact,
                turn_key=f"{turn_id}/{call.id}",
                own_key=owned_key(conversation_id, turn_id, call.id, position),
            )

        if isinstance(call.results, str):
            row, parts = encode_call(call, body_key)
        else:
            row, parts = await asyncio.to_thread(encode_call, call, body_key)
        values = [sql.scope(conversation_id, turn_id), sql.opt(conversation_id), sql.b(turn_id)]
        values += sql.bytea(row, sql.CALL_BYTEA)
        key = (values[0], values[2], values[3])  # scope, turn id, call id
        part_values = [(*sql.bytea(p, sql.PART_BYTEA), *key) for p in parts]
        counted = None
        if conversation_id is not None:
            counted = count_params(key, call.checksum, call.validated_checksum)

        async def write(pool: Pool) -> list[str]:
            # one round trip: the statements are pipelined in one transaction
            async with pool.connection() as conn, conn.pipeline(), conn.transaction():
                if counted is not None:  # a conversation's: its kept counts first
                    await conn.execute(BUMP, key[:1])
                    await conn.execute(COUNT, counted)
                await conn.execute(sql.CALL_UPSERT, values)
                old = await conn.execute(sql.PARTS_DELETE, key)
                if part_values:
                    async with conn.cursor() as cur:
                        await cur.executemany(sql.PART_INSERT, part_values)
                await sql.run_writers(conn, writers)
            return await sql.spool_keys(old)

        stale = await sql.settled(self._run(write), writers)
        kept = {sql.text(p[-1]) for p in parts if p[-1] is not None}
        await self._forget_bodies([k for k in stale if k not in kept])

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
        key = (sql.scope(conversation_id, turn_id), sql.b(turn_id), sql.b(call_id))

        async def delete(pool: Pool) -> list[str] | None:
            async with pool.connection() as conn, conn.pipeline(), conn.transaction():
                if conversation_id is not None:  # a conversation's: its kept counts first
                    await conn.execute(BUMP, key[:1])
                    await conn.execute(COUNT, count_params(key, None, None))
                parts = await conn.execute(sql.PARTS_DELETE, key)
                gone = await conn.execute(sql.CALL_DELETE, key)
                await sql.run_writers(conn, writers)
            if await gone.fetchone() is None:
                return None
            return await sql.spool_keys(parts)

        stale = await sql.settled(self._run(delete), writers)
        if stale is None:
            return False
        await self._forget_bodies(stale)
        return True

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return the conversation's messages and tool calls, each in storage order."""
        scope = sql.scope(conversation_id, "")

        async def load(pool: Pool) -> tuple[list[Message], list[ToolCall]]:
            # one snapshot for both, one round trip
            async with pool.connection() as conn, conn.pipeline(), conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                messages = await conn.execute(
                    f"{sql.MESSAGE_SELECT} WHERE scope = %s ORDER BY seq", (scope,)
                )
                calls = await sql.query_calls(self._spool, conn, "scope = %s", (scope,))
            return [message_from_row(r) for r in await messages.fetchall()], await calls()

        return await self._run(load)

    async def load_history(self, conversation_id: str) -> ConversationHistory:
        """The conversation's kept counts; its records load when first read (`HistoryStore`)."""
        if reads_its_own_way(self, PostgresStore):  # a subclass's load_conversation answers
            return ConversationHistory.of_records(*await self.load_conversation(conversation_id))
        scope = sql.scope(conversation_id, "")

        async def load(pool: Pool) -> ConversationHistory:
            async with pool.connection() as conn:
                index, message_seq, call_seq = await read_index(conn, scope, self._indexes)
            return index.history(
                LazyRecords(partial(self._read_upto, scope, False, message_seq)),
                LazyRecords(partial(self._read_upto, scope, True, call_seq)),
                copy=True,  # the counts change on the store's thread while a turn copies them
            )

        return await self._run(load)

    def _read_upto(self, scope: bytes, calls: bool, seq: int) -> list[Any]:
        """A lazy history's records up to ``seq``, read from the reader's thread."""
        import psycopg

        where, params = "scope = %s AND seq <= %s", (scope, seq)

        async def read(pool: Pool) -> list[Any]:
            async with pool.connection() as conn, conn.pipeline():
                if calls:
                    return await (await sql.query_calls(self._spool, conn, where, params))()
                return await sql.select_messages(conn, where, params)

        try:
            return self._loop_thread().run_sync(self._on_loop(read))
        except (psycopg.Error, RuntimeError) as exc:
            raise StoreError(f"reading the conversation failed: {exc}") from exc

    # -- CounterStore (one transaction each, advisory-locked per counter) ---------------------
    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """Reserve ``slot`` under every counter or none (see `CounterStore.reserve_slot`).

        Run again on a fresh connection when the first died, like every job: reserving a slot
        id again is idempotent.
        """

        async def job(pool: Pool) -> SlotGrant:
            async with pool.connection() as conn:
                return await slots_sql.reserve(conn, slot, limits, now, ttl)

        return await self._run(job)

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

        async def job(pool: Pool) -> None:
            async with pool.connection() as conn:
                await slots_sql.settle(conn, slot, counters, consume, now, amount)

        await self._run(job)

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """What ``counter`` holds at ``now`` (see `CounterStore.count_slots`)."""

        async def job(pool: Pool) -> int:
            async with pool.connection() as conn:
                return await slots_sql.count(conn, counter, window, now)

        return await self._run(job)

    # -- reading helpers ------------------------------------------------------------------------
    async def tool_calls_for_turn(self, turn_id: str) -> list[ToolCall]:
        """Return the calls a turn stored (with or without a conversation), in storage order."""

        async def read(pool: Pool) -> list[ToolCall]:
            async with pool.connection() as conn, conn.pipeline():
                calls = await sql.query_calls(self._spool, conn, "turn_id = %s", (sql.b(turn_id),))
            return await calls()

        return await self._run(read)

    async def messages_for_turn(self, turn_id: str) -> list[Message]:
        """Return the messages a turn stored, in storage order."""

        async def read(pool: Pool) -> list[Message]:
            async with pool.connection() as conn:
                return await sql.select_messages(conn, "turn_id = %s", (sql.b(turn_id),))

        return await self._run(read)

    async def turn(self, turn_id: str) -> TurnRecord | None:
        """Return a stored turn's summary, if any."""

        async def read(pool: Pool) -> Row | None:
            async with pool.connection() as conn:
                cur = await conn.execute(sql.TURN_SELECT + " WHERE turn_id = %s", (sql.b(turn_id),))
                found: Row | None = await cur.fetchone()
                return found

        row = await self._run(read)
        return None if row is None else turn_from_row(row)

    # -- internals ------------------------------------------------------------------------------
    async def _forget_bodies(self, keys: list[str]) -> None:
        """Delete the bodies this store copied for rows that no longer refer to them."""
        owned = [k for k in keys if is_owned(k)]
        if owned:
            spool = self._spool
            await asyncio.to_thread(lambda: [spool.delete(k) for k in owned])


async def _nothing(pool: Pool) -> None:
    return None


async def _execute(pool: Pool, query: str, values: Sequence[object]) -> None:
    async with pool.connection() as conn:
        await conn.execute(query, values)


PostgresStore.__module__ = "pipeline.stores"
