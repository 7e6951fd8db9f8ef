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
import math
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .._errors import InvalidRunnerConfigError
from ._body_refs import is_owned, owned_key, reference_body
from ._postgres_schema import migrate
from ._sqlite_codec import (
    CALL_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    PartRow,
    call_from_row,
    encode_call,
    encode_message,
    encode_turn,
    message_from_row,
    turn_from_row,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

    from .._toolcall import ToolCall
    from ..artifacts._artifact import SpooledArtifact
    from ..models._seam import Message
    from ._spool import SpoolStore
    from ._store import TurnRecord

__all__ = ["PostgresStore"]

Row = tuple[Any, ...]

_CALL_BYTEA = (0, 1, 2, 12)  # id, tool, args, results_text in CALL_COLUMNS
_MESSAGE_BYTEA = (0, 2, 4)  # id, content, tool_call_ids
_TURN_BYTEA = (0, 1, 3, 4, 7)  # turn_id, conversation_id, input, output, error_message
_PART_BYTEA = (4, 6, 8)  # text, media, spool_key after the call's seq

_CALL_SELECT = "SELECT seq, " + ", ".join(CALL_COLUMNS) + " FROM loopware.tool_calls"
_PART_SELECT = (
    "SELECT call_seq, position, kind, artifact_class, text, byte_length, media, data, "
    "spool_key FROM loopware.tool_call_results"
)
_CALL_UPSERT = (
    "INSERT INTO loopware.tool_calls (scope, conversation_id, turn_id, "
    + ", ".join(CALL_COLUMNS)
    + ") VALUES ("
    + ", ".join(["%s"] * (len(CALL_COLUMNS) + 3))
    + ") ON CONFLICT (scope, turn_id, id) DO UPDATE SET conversation_id = "
    + "excluded.conversation_id, "
    + ", ".join(f"{c} = excluded.{c}" for c in CALL_COLUMNS[1:])
    + " RETURNING seq"
)
_PART_INSERT = (
    "INSERT INTO loopware.tool_call_results "
    "(call_seq, position, kind, artifact_class, text, byte_length, media, data, spool_key) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_MESSAGE_UPSERT = (
    "INSERT INTO loopware.messages (scope, conversation_id, turn_id, "
    + ", ".join(MESSAGE_COLUMNS)
    + ") VALUES ("
    + ", ".join(["%s"] * (len(MESSAGE_COLUMNS) + 3))
    + ") ON CONFLICT (scope, id) DO UPDATE SET "
    + "conversation_id = excluded.conversation_id, turn_id = excluded.turn_id, "
    + ", ".join(f"{c} = excluded.{c}" for c in MESSAGE_COLUMNS[1:])
)
_MESSAGE_SELECT = "SELECT " + ", ".join(MESSAGE_COLUMNS) + " FROM loopware.messages"
_TURN_UPSERT = (
    "INSERT INTO loopware.turns ("
    + ", ".join(TURN_COLUMNS)
    + ") VALUES ("
    + ", ".join(["%s"] * len(TURN_COLUMNS))
    + ") ON CONFLICT (turn_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in TURN_COLUMNS[1:])
)
_TURN_SELECT = "SELECT " + ", ".join(TURN_COLUMNS) + " FROM loopware.turns"


def _b(value: str | bytes) -> bytes:
    """Free text as ``bytea``: its UTF-8 bytes, lone surrogates included."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def _bytea(values: Sequence[Any], positions: tuple[int, ...]) -> list[Any]:
    out = list(values)
    for i in positions:
        if out[i] is not None:
            out[i] = _b(out[i])
    return out


def _scope(conversation_id: str | None, turn_id: str) -> bytes:
    return _b(f"t:{turn_id}" if conversation_id is None else f"c:{conversation_id}")


def _opt(value: str | None) -> bytes | None:
    return None if value is None else _b(value)


def _check(
    conninfo: object, spool: object, min_size: object, max_size: object, timeout: object
) -> None:
    bad: list[str] = []
    if not isinstance(conninfo, str) or not conninfo.strip():
        bad.append(f"conninfo must be a non-empty connection string, got {conninfo!r}")
    if not all(callable(getattr(spool, m, None)) for m in ("write", "read", "delete")):
        bad.append(f"spool must implement SpoolStore (write, read, delete), not {spool!r}")
    sizes_ok = True
    for name, size in (("min_size", min_size), ("max_size", max_size)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            bad.append(f"{name} must be a non-negative int, not {size!r}")
            sizes_ok = False
    if sizes_ok and (max_size < 1 or max_size < min_size):  # type: ignore[operator]
        bad.append(f"max_size must be at least 1 and min_size, not {max_size!r}")
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        bad.append(f"timeout must be a positive number of seconds, not {timeout!r}")
    if bad:
        raise InvalidRunnerConfigError("PostgresStore: " + "; ".join(bad), field="store")


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
        _check(conninfo, spool, min_size, max_size, timeout)
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
        return f"PostgresStore({_redact(self._conninfo)!r}, {state})"

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

        where = _redact(self._conninfo)
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
        values = _bytea(encode_turn(record), _TURN_BYTEA)
        pool = await self._ready()
        async with pool.connection() as conn:
            await conn.execute(_TURN_UPSERT, values)

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Insert or replace a message by id (committed before returning)."""
        values = [_scope(conversation_id, turn_id), _opt(conversation_id), _b(turn_id)]
        values += _bytea(encode_message(message), _MESSAGE_BYTEA)
        pool = await self._ready()
        async with pool.connection() as conn:
            await conn.execute(_MESSAGE_UPSERT, values)

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
        values = [_scope(conversation_id, turn_id), _opt(conversation_id), _b(turn_id)]
        values += _bytea(row, _CALL_BYTEA)
        pool = await self._ready()
        async with pool.connection() as conn:
            seq = await _one(conn, _CALL_UPSERT, values)
            stale = await _stale_keys(conn, seq)
            if stale is not None:
                await conn.execute(
                    "DELETE FROM loopware.tool_call_results WHERE call_seq = %s", (seq,)
                )
            if parts:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        _PART_INSERT, [_bytea((seq, *p), _PART_BYTEA) for p in parts]
                    )
        kept = {_text(p[-1]) for p in parts if p[-1] is not None}
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
                (_scope(conversation_id, turn_id), _b(turn_id), _b(call_id)),
            )
            found = await cur.fetchone()
            if found is None:
                return False
            stale = await _stale_keys(conn, found[0])
            await conn.execute("DELETE FROM loopware.tool_calls WHERE seq = %s", (found[0],))
        await self._forget_bodies(stale or [])
        return True

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return the conversation's messages and tool calls, each in storage order."""
        scope = _scope(conversation_id, "")
        pool = await self._ready()
        async with pool.connection() as conn, conn.transaction():  # one snapshot for both
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            messages = await _select_messages(conn, "scope = %s", (scope,))
            calls = await self._select_calls(conn, "scope = %s", (scope,))
        return messages, calls

    # -- reading helpers ------------------------------------------------------------------------
    async def tool_calls_for_turn(self, turn_id: str) -> list[ToolCall]:
        """Return the calls a turn stored (with or without a conversation), in storage order."""
        pool = await self._ready()
        async with pool.connection() as conn:
            return await self._select_calls(conn, "turn_id = %s", (_b(turn_id),))

    async def messages_for_turn(self, turn_id: str) -> list[Message]:
        """Return the messages a turn stored, in storage order."""
        pool = await self._ready()
        async with pool.connection() as conn:
            return await _select_messages(conn, "turn_id = %s", (_b(turn_id),))

    async def turn(self, turn_id: str) -> TurnRecord | None:
        """Return a stored turn's summary, if any."""
        pool = await self._ready()
        async with pool.connection() as conn:
            cur = await conn.execute(_TURN_SELECT + " WHERE turn_id = %s", (_b(turn_id),))
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
        cur = await conn.execute(f"{_CALL_SELECT} WHERE {where} ORDER BY seq", params)
        rows = await cur.fetchall()
        if not rows:
            return []
        parts: dict[int, list[PartRow]] = {}
        if any(row[CALL_COLUMNS.index("results_kind") + 1] != "text" for row in rows):
            cur = await conn.execute(
                f"{_PART_SELECT} WHERE call_seq IN "
                f"(SELECT seq FROM loopware.tool_calls WHERE {where})",
                params,
            )
            for part in await cur.fetchall():
                parts.setdefault(part[0], []).append(part[1:])
        spool = self._spool
        return [call_from_row(row[1:], parts.get(row[0], ()), spool) for row in rows]


async def _one(conn: AsyncConnection[Row], query: str, params: Sequence[Any]) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    assert row is not None  # RETURNING always yields the row
    return row[0]


async def _stale_keys(conn: AsyncConnection[Row], seq: int) -> list[str] | None:
    """Return the spool keys of the call's current parts (None when it has no parts)."""
    cur: AsyncCursor[Row] = await conn.execute(
        "SELECT spool_key FROM loopware.tool_call_results WHERE call_seq = %s", (seq,)
    )
    rows = await cur.fetchall()
    if not rows:
        return None
    return [_text(key) for (key,) in rows if key is not None]


async def _select_messages(
    conn: AsyncConnection[Row], where: str, params: tuple[bytes, ...]
) -> list[Message]:
    cur = await conn.execute(f"{_MESSAGE_SELECT} WHERE {where} ORDER BY seq", params)
    return [message_from_row(row) for row in await cur.fetchall()]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def _redact(conninfo: str) -> str:
    """The connection string without its password (for messages and reprs)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:  # the extra is missing: show nothing that could hold a secret
        return "<conninfo>"
    try:
        params = conninfo_to_dict(conninfo)
    except Exception:  # a malformed string: never echo it back
        return "<conninfo>"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


PostgresStore.__module__ = "pipeline"
