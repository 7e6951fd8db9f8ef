"""The SQL of `PostgresStore` and how its values become ``bytea`` and back.

Free text goes into ``bytea`` columns as UTF-8 with ``surrogatepass`` (see
``_postgres_schema``); the row shapes are `SqliteStore`'s (``_sqlite_codec``), so both stores
encode and decode calls, messages and turns with the same code.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import InvalidRunnerConfigError
from ._sqlite_codec import (
    CALL_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    PartRow,
    call_from_row,
    message_from_row,
)

R = TypeVar("R")

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

    from ..calls._toolcall import ToolCall
    from ..models._message import Message
    from ._spool import SpoolStore
    from ._store import TransactionWriter

__all__ = [
    "CALL_BYTEA",
    "CALL_DELETE",
    "CALL_SELECT",
    "CALL_UPSERT",
    "MESSAGE_BYTEA",
    "MESSAGE_UPSERT",
    "PARTS_DELETE",
    "PART_BYTEA",
    "PART_INSERT",
    "PART_SELECT",
    "TURN_BYTEA",
    "TURN_SELECT",
    "TURN_UPSERT",
    "Row",
    "b",
    "bytea",
    "check_options",
    "opt",
    "query_calls",
    "redact",
    "run_writers",
    "scope",
    "select_messages",
    "settled",
    "spool_keys",
    "text",
]

Row = tuple[Any, ...]

CALL_BYTEA = (0, 1, 2, 12, 14, 17)  # id, tool, args, results_text, decisions, unparsed_args
MESSAGE_BYTEA = (0, 2, 4, 5)  # id, content, tool_call_ids, provider_state
TURN_BYTEA = (0, 1, 3, 4, 7)  # turn_id, conversation_id, input, output, error_message
PART_BYTEA = (3, 5, 7)  # text, media, spool_key of a PartRow

CALL_SELECT = "SELECT seq, " + ", ".join(CALL_COLUMNS) + " FROM loopware.tool_calls"
PART_SELECT = (
    "SELECT call_seq, position, kind, artifact_class, text, byte_length, media, data, "
    "spool_key FROM loopware.tool_call_results"
)
CALL_UPSERT = (
    "INSERT INTO loopware.tool_calls (scope, conversation_id, turn_id, "
    + ", ".join(CALL_COLUMNS)
    + ") VALUES ("
    + ", ".join(["%s"] * (len(CALL_COLUMNS) + 3))
    + ") ON CONFLICT (scope, turn_id, id) DO UPDATE SET conversation_id = "
    + "excluded.conversation_id, "
    + ", ".join(f"{c} = excluded.{c}" for c in CALL_COLUMNS[1:])
)
_CALL_SEQ = "(SELECT seq FROM loopware.tool_calls WHERE scope = %s AND turn_id = %s AND id = %s)"
PART_INSERT = (
    "INSERT INTO loopware.tool_call_results "
    "(position, kind, artifact_class, text, byte_length, media, data, spool_key, call_seq) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, " + _CALL_SEQ + ")"
)
"""A part's values, then the call's (scope, turn id, id): no round trip to learn its seq."""
PARTS_DELETE = (
    "DELETE FROM loopware.tool_call_results WHERE call_seq = " + _CALL_SEQ + " RETURNING spool_key"
)
"""Delete a call's parts, returning their spool keys."""
CALL_DELETE = (
    "DELETE FROM loopware.tool_calls WHERE scope = %s AND turn_id = %s AND id = %s RETURNING seq"
)
MESSAGE_UPSERT = (
    "INSERT INTO loopware.messages (scope, conversation_id, turn_id, "
    + ", ".join(MESSAGE_COLUMNS)
    + ") VALUES ("
    + ", ".join(["%s"] * (len(MESSAGE_COLUMNS) + 3))
    + ") ON CONFLICT (scope, id) DO UPDATE SET "
    + "conversation_id = excluded.conversation_id, turn_id = excluded.turn_id, "
    + ", ".join(f"{c} = excluded.{c}" for c in MESSAGE_COLUMNS[1:])
)
MESSAGE_SELECT = "SELECT " + ", ".join(MESSAGE_COLUMNS) + " FROM loopware.messages"
TURN_UPSERT = (
    "INSERT INTO loopware.turns ("
    + ", ".join(TURN_COLUMNS)
    + ") VALUES ("
    + ", ".join(["%s"] * len(TURN_COLUMNS))
    + ") ON CONFLICT (turn_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in TURN_COLUMNS[1:])
)
TURN_SELECT = "SELECT " + ", ".join(TURN_COLUMNS) + " FROM loopware.turns"


def b(value: str | bytes) -> bytes:
    """Free text as ``bytea``: its UTF-8 bytes, lone surrogates included."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def bytea(values: Sequence[Any], positions: tuple[int, ...]) -> list[Any]:
    out = list(values)
    for i in positions:
        if out[i] is not None:
            out[i] = b(out[i])
    return out


def scope(conversation_id: str | None, turn_id: str) -> bytes:
    return b(f"t:{turn_id}" if conversation_id is None else f"c:{conversation_id}")


def opt(value: str | None) -> bytes | None:
    return None if value is None else b(value)


def check_options(
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


async def spool_keys(cur: AsyncCursor[Row]) -> list[str]:
    """Return the spool keys a `PARTS_DELETE` returned."""
    return [text(key) for (key,) in await cur.fetchall() if key is not None]


async def select_messages(
    conn: AsyncConnection[Row], where: str, params: tuple[object, ...]
) -> list[Message]:
    cur = await conn.execute(f"{MESSAGE_SELECT} WHERE {where} ORDER BY seq", params)
    return [message_from_row(row) for row in await cur.fetchall()]


def text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def redact(conninfo: str) -> str:
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


async def query_calls(
    spool: SpoolStore, conn: AsyncConnection[Row], where: str, params: tuple[object, ...]
) -> Callable[[], Awaitable[list[ToolCall]]]:
    """Queue the queries for the calls matching ``where`` and their parts (pipelined).

    Returns what decodes them once the results are in.
    """
    calls = await conn.execute(f"{CALL_SELECT} WHERE {where} ORDER BY seq", params)
    parts = await conn.execute(
        f"{PART_SELECT} WHERE call_seq IN (SELECT seq FROM loopware.tool_calls WHERE {where})",
        params,
    )

    async def decode() -> list[ToolCall]:
        by_call: dict[int, list[PartRow]] = {}
        for part in await parts.fetchall():
            by_call.setdefault(part[0], []).append(part[1:])
        rows = await calls.fetchall()
        return [call_from_row(row[1:], by_call.get(row[0], ()), spool) for row in rows]

    return decode


async def run_writers(conn: AsyncConnection[Row], writers: Sequence[TransactionWriter]) -> None:
    """Run other writers' writes in the transaction of ``conn`` (see `JointStore`)."""
    for writer in writers:
        pending = writer.write(conn)
        if pending is not None:
            await pending


async def settled(write: Awaitable[R], writers: Sequence[TransactionWriter]) -> R:
    """Await a write whose transaction runs ``writers``, then tell them how it ended."""
    if not writers:
        return await write
    committed = False
    try:
        result = await write
        committed = True
        return result
    finally:
        for writer in writers:
            with contextlib.suppress(Exception):
                writer.settle(committed)
