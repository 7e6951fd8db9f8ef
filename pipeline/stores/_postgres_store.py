"""`PostgresStore`: the `TurnStore` on PostgreSQL (psycopg 3, async, a connection pool).

Same semantics as `SqliteStore`: messages keyed by (conversation, id), tool calls by
(conversation, turn, id) with a replaced call keeping its place, turns without a conversation
kept under their turn, artifact bodies by reference to a spool store. Every write is one
transaction that has committed before the coroutine returns, so several processes (workers) can
share one database; storage order is the order rows were first inserted.

psycopg is imported when the store opens, never by ``import pipeline``: install the extra
``loopware[postgres]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self

from .._errors import InvalidRunnerConfigError
from . import _postgres_sql as sql
from ._body_refs import is_owned, owned_key, reference_body
from ._postgres_schema import migrate
from ._postgres_sql import Row
from ._sqlite_codec import (
    CALL_COLUMNS,
    PartRow,
    call_from_row,
    encode_call,
    encode_message,
    encode_turn,
    turn_from_row,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

    from .._toolcall import ToolCall
    from ..artifacts._artifact import SpooledArtifact
    from ..models._seam import Message
    from ._spool import SpoolStore
    from ._store import TurnRecord

__all__ = ["PostgresStore"]


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
    opens it) and `aclose()`.
    """

    __slots__ = ("_closed", "_conninfo", "_lock", "_max", "_min", "_pool", "_spool", "_timeout")

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
        self._conninfo = conninfo
        self._spool = spool
        self._min = min_size
        self._max = max_size
        self._timeout = float(timeout)
        self._pool: AsyncConnectionPool[AsyncConnection[Row]] | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    def __repr__(self) -> str:
        """Show the server (without a password) and whether the store is open."""
        state = "closed" if self._closed else "open" if self._pool is not None else "new"
        return f"PostgresStore({sql.redact(self._conninfo)!r}, {state})"

    @property
    def spool(self) -> SpoolStore:
        """Where the artifact bodies of stored calls are kept."""
        return self._spool

    # -- life cycle -----------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect the pool and create or migrate the schema (idempotent).

        Raises:
            InvalidRunnerConfigError: the server cannot be reached in ``timeout`` seconds, or
                its schema is newer than this loopware's.
            RuntimeError: the store was closed.
        """
        await self._ready()

    async def _ready(self) -> AsyncConnectionPool[AsyncConnection[Row]]:
        pool = self._pool
        if pool is not None:
            return pool
        if self._closed:
            raise RuntimeError("Cannot operate on a closed PostgresStore.")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._pool is not None:
                return self._pool
            if self._closed:
                raise RuntimeError("Cannot operate on a closed PostgresStore.")
            self._pool = await self._connect()
            return self._pool

    async def _connect(self) -> AsyncConnectionPool[AsyncConnection[Row]]:
        import psycopg
        from psycopg_pool import AsyncConnectionPool, PoolTimeout

        where = sql.redact(self._conninfo)
        pool: AsyncConnectionPool[AsyncConnection[Row]] = AsyncConnectionPool(
            self._conninfo,
            min_size=self._min,
            max_size=self._max,
            timeout=self._timeout,
            open=False,
            name="loopware-store",
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
            async with pool.connection() as conn:
                await migrate(conn, where)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise InvalidRunnerConfigError(
                f"PostgresStore: cannot open {where!r}: {exc}", field="store"
            ) from exc
        except BaseException:
            await pool.close()
            raise
        return pool

    async def aclose(self) -> None:
        """Close the pool (idempotent); operations afterwards raise `RuntimeError`."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

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
        pool = await self._ready()
        async with pool.connection() as conn:
            await conn.execute(sql.TURN_UPSERT, values)

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Insert or replace a message by id (committed before returning)."""
        values = [sql.scope(conversation_id, turn_id), sql.opt(conversation_id), sql.b(turn_id)]
        values += sql.bytea(encode_message(message), sql.MESSAGE_BYTEA)
        pool = await self._ready()
        async with pool.connection() as conn:
            await conn.execute(sql.MESSAGE_UPSERT, values)

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        """Insert or replace a turn's call by id, keeping its position (committed first).

        Artifact bodies the spool does not hold yet are copied into it first (off the event
        loop, streaming), so a committed row never refers to a missing body.
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
        pool = await self._ready()
        async with pool.connection() as conn:
            seq = await sql.fetch_one(conn, sql.CALL_UPSERT, values)
            stale = await sql.spool_keys(conn, seq)
            if stale is not None:
                await conn.execute(
                    "DELETE FROM loopware.tool_call_results WHERE call_seq = %s", (seq,)
                )
            if parts:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        sql.PART_INSERT, [sql.bytea((seq, *p), sql.PART_BYTEA) for p in parts]
                    )
        kept = {sql.text(p[-1]) for p in parts if p[-1] is not None}
        await self._forget_bodies([k for k in stale or () if k not in kept])

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        """Delete a turn's call by id (committed before returning); return whether it existed."""
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT seq FROM loopware.tool_calls WHERE scope = %s AND turn_id = %s "
                "AND id = %s FOR UPDATE",
                (sql.scope(conversation_id, turn_id), sql.b(turn_id), sql.b(call_id)),
            )
            found = await cur.fetchone()
            if found is None:
                return False
            stale = await sql.spool_keys(conn, found[0])
            await conn.execute("DELETE FROM loopware.tool_calls WHERE seq = %s", (found[0],))
        await self._forget_bodies(stale or [])
        return True

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return the conversation's messages and tool calls, each in storage order."""
        scope = sql.scope(conversation_id, "")
        pool = await self._ready()
        async with pool.connection() as conn, conn.transaction():  # one snapshot for both
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            messages = await sql.select_messages(conn, "scope = %s", (scope,))
            calls = await self._select_calls(conn, "scope = %s", (scope,))
        return messages, calls

    # -- reading helpers ------------------------------------------------------------------------
    async def tool_calls_for_turn(self, turn_id: str) -> list[ToolCall]:
        """Return the calls a turn stored (with or without a conversation), in storage order."""
        pool = await self._ready()
        async with pool.connection() as conn:
            return await self._select_calls(conn, "turn_id = %s", (sql.b(turn_id),))

    async def messages_for_turn(self, turn_id: str) -> list[Message]:
        """Return the messages a turn stored, in storage order."""
        pool = await self._ready()
        async with pool.connection() as conn:
            return await sql.select_messages(conn, "turn_id = %s", (sql.b(turn_id),))

    async def turn(self, turn_id: str) -> TurnRecord | None:
        """Return a stored turn's summary, if any."""
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(sql.TURN_SELECT + " WHERE turn_id = %s", (sql.b(turn_id),))
            row = await cur.fetchone()
        return None if row is None else turn_from_row(row)

    # -- internals ------------------------------------------------------------------------------
    async def _forget_bodies(self, keys: list[str]) -> None:
        """Delete the bodies this store copied for rows that no longer refer to them."""
        owned = [k for k in keys if is_owned(k)]
        if owned:
            spool = self._spool
            await asyncio.to_thread(lambda: [spool.delete(k) for k in owned])

    async def _select_calls(
        self, conn: AsyncConnection[Row], where: str, params: tuple[bytes, ...]
    ) -> list[ToolCall]:
        cur = await conn.execute(f"{sql.CALL_SELECT} WHERE {where} ORDER BY seq", params)
        rows = await cur.fetchall()
        if not rows:
            return []
        parts: dict[int, list[PartRow]] = {}
        if any(row[CALL_COLUMNS.index("results_kind") + 1] != "text" for row in rows):
            cur = await conn.execute(
                f"{sql.PART_SELECT} WHERE call_seq IN "
                f"(SELECT seq FROM loopware.tool_calls WHERE {where})",
                params,
            )
            for part in await cur.fetchall():
                parts.setdefault(part[0], []).append(part[1:])
        spool = self._spool
        return [call_from_row(row[1:], parts.get(row[0], ()), spool) for row in rows]


PostgresStore.__module__ = "pipeline"
