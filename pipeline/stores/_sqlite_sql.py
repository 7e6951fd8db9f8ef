"""The SQL statements of `SqliteStore` (built once from its codec's columns), and its reads."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._spool import MemorySpoolStore, SpoolStore
from ._sqlite_codec import (
    CALL_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    PartRow,
    call_from_row,
    message_from_row,
)

if TYPE_CHECKING:
    from ..calls._toolcall import ToolCall
    from ..models._message import Message

__all__ = [
    "CALL_FIND",
    "CALL_INSERT",
    "CALL_SELECT",
    "CALL_UPDATE",
    "MESSAGE_SELECT",
    "MESSAGE_UPSERT",
    "PART_INSERT",
    "PART_KEYS",
    "PART_SELECT",
    "TURN_SELECT",
    "TURN_UPSERT",
    "select_calls",
    "select_messages",
]

_NO_BODIES = MemorySpoolStore()

CALL_SELECT = "SELECT seq, " + ", ".join(CALL_COLUMNS) + " FROM tool_calls"
PART_SELECT = (
    "SELECT call_seq, position, kind, artifact_class, text, byte_length, media, data, spool_key "
    "FROM tool_call_results"
)
CALL_UPDATE = (
    "UPDATE tool_calls SET conversation_id = ?, turn_id = ?, "
    + ", ".join(f"{c} = ?" for c in CALL_COLUMNS[1:])
    + " WHERE seq = ?"
)
CALL_FIND = (
    "SELECT seq, checksum, validated_checksum, id FROM tool_calls "
    "WHERE scope = ? AND turn_id = ? AND id = ?"
)
"""A turn's call by id: its seq, and the keys it counts under (``_sqlite_history.py``)."""
CALL_INSERT = (
    "INSERT INTO tool_calls (scope, conversation_id, turn_id, "
    + ", ".join(CALL_COLUMNS)
    + ") VALUES ("
    + ", ".join("?" * (len(CALL_COLUMNS) + 3))
    + ")"
)
PART_INSERT = (
    "INSERT INTO tool_call_results "
    "(call_seq, position, kind, artifact_class, text, byte_length, media, data, spool_key) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
PART_KEYS = "SELECT spool_key FROM tool_call_results WHERE spool_key IS NOT NULL AND call_seq = ?"
MESSAGE_UPSERT = (
    "INSERT INTO messages (scope, conversation_id, turn_id, "
    + ", ".join(MESSAGE_COLUMNS)
    + ") VALUES ("
    + ", ".join("?" * (len(MESSAGE_COLUMNS) + 3))
    + ") ON CONFLICT (scope, id) DO UPDATE SET "
    + "conversation_id = excluded.conversation_id, turn_id = excluded.turn_id, "
    + ", ".join(f"{c} = excluded.{c}" for c in MESSAGE_COLUMNS[1:])
)
MESSAGE_SELECT = "SELECT " + ", ".join(MESSAGE_COLUMNS) + " FROM messages"
TURN_UPSERT = (
    "INSERT OR REPLACE INTO turns ("
    + ", ".join(TURN_COLUMNS)
    + ") VALUES ("
    + ", ".join("?" * len(TURN_COLUMNS))
    + ")"
)
TURN_SELECT = "SELECT " + ", ".join(TURN_COLUMNS) + " FROM turns"


def select_messages(cur: sqlite3.Cursor, where: str, params: tuple[object, ...]) -> list[Message]:
    """The messages ``where`` selects, in storage order."""
    rows = cur.execute(f"{MESSAGE_SELECT} WHERE {where} ORDER BY seq", params).fetchall()
    return [message_from_row(row) for row in rows]


def select_calls(
    cur: sqlite3.Cursor,
    where: str,
    params: tuple[object, ...],
    spool: Callable[[], SpoolStore],
) -> list[ToolCall]:
    """The calls ``where`` selects, in storage order (``spool()``: where their bodies are)."""
    rows = cur.execute(f"{CALL_SELECT} WHERE {where} ORDER BY seq", params).fetchall()
    if not rows:
        return []
    parts: dict[int, list[PartRow]] = {}
    if any(row[CALL_COLUMNS.index("results_kind") + 1] != "text" for row in rows):
        part_rows = cur.execute(
            f"{PART_SELECT} WHERE call_seq IN (SELECT seq FROM tool_calls WHERE {where})",
            params,
        ).fetchall()
        for part in part_rows:
            parts.setdefault(part[0], []).append(part[1:])
    referenced = any(p[-1] is not None for found in parts.values() for p in found)
    bodies = spool() if referenced else _NO_BODIES
    return [call_from_row(row[1:], parts.get(row[0], ()), bodies) for row in rows]
