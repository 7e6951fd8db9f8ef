"""The SQL statements of `SqliteStore` (built once from the codec's column lists)."""

from __future__ import annotations

from ._sqlite_codec import CALL_COLUMNS, MESSAGE_COLUMNS, TURN_COLUMNS

__all__ = [
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
]

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
