"""`SqliteStore`'s kept conversation counts: written with each call, read as a delta.

See ``pipeline/stores/_history_index.py`` for the design. SQLite runs one write transaction at a
time per file (``BEGIN IMMEDIATE``), so a conversation's versions follow commit order whichever
process writes; a read transaction sees one snapshot of the version and the rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ._conversation import ConversationHistory, ConversationIndex, LazyRecords
from ._history_index import CallKeys, IndexCache, deltas
from ._sqlite_codec import from_sql_text, sql_text

__all__ = ["count_call", "read_history", "read_index", "record_seqs"]

_BUMP = (
    "INSERT INTO conversations (scope, version) VALUES (?, 1) "
    "ON CONFLICT (scope) DO UPDATE SET version = version + 1 RETURNING version"
)
_COUNT = (
    "INSERT INTO conversation_counts (scope, kind, key, n, version) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (scope, kind, key) DO UPDATE SET n = n + excluded.n, version = excluded.version"
)
_SINCE = "SELECT kind, key, n, version FROM conversation_counts WHERE scope = ? AND version > ?"


def count_call(
    cur: sqlite3.Cursor, scope: str | bytes, old: Sequence[Any] | None, new: CallKeys | None
) -> None:
    """Count a conversation's call write in its transaction.

    ``old`` is the replaced row's (checksum, validated checksum, id) as stored (an id with a
    lone surrogate is stored as bytes), None for a new call; ``new`` None for a delete.
    """
    was = None if old is None else (old[0], old[1], from_sql_text(old[2]))
    changes = deltas(was, new)
    if not changes:
        return
    version = cur.execute(_BUMP, (scope,)).fetchone()[0]
    cur.executemany(_COUNT, [(scope, k, sql_text(key), n, version) for k, key, n in changes])


def read_index(cur: sqlite3.Cursor, scope: str | bytes, cache: IndexCache) -> ConversationIndex:
    """The conversation's index, reading only the rows changed since ``cache`` read it.

    Runs inside the caller's read transaction (one snapshot of version and rows).
    """
    name = from_sql_text(scope)
    row = cur.execute("SELECT version FROM conversations WHERE scope = ?", (scope,)).fetchone()
    version = 0 if row is None else int(row[0])
    since = cache.version(name)
    rows = () if since >= version else cur.execute(_SINCE, (scope, since)).fetchall()
    return cache.refresh(
        name, version, ((kind, from_sql_text(key), n, at) for kind, key, n, at in rows)
    )


def record_seqs(cur: sqlite3.Cursor) -> tuple[int, int]:
    """The last message and call seqs written to the file (every row up to them is visible).

    ``AUTOINCREMENT`` seqs grow with each insert and SQLite writes one transaction at a time,
    so the rows of a conversation with a seq up to these are the ones it held at this snapshot
    (a replaced row keeps its seq).
    """
    seqs = dict(cur.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    return int(seqs.get("messages", 0)), int(seqs.get("tool_calls", 0))


def read_history(
    cur: sqlite3.Cursor,
    scope: str | bytes,
    cache: IndexCache,
    read_upto: Callable[[bool, int], list[Any]],
) -> ConversationHistory:
    """The conversation's history: its counts now, its records as ``read_upto`` loads them.

    ``read_upto(calls, seq)`` reads the messages (``calls`` False) or the calls with a seq up
    to ``seq``, when first read; the seqs are this snapshot's, so what loads is what the
    conversation held now, whoever wrote since.
    """
    index = read_index(cur, scope, cache)
    message_seq, call_seq = record_seqs(cur)
    return index.history(
        LazyRecords(partial(read_upto, False, message_seq)),
        LazyRecords(partial(read_upto, True, call_seq)),
        copy=True,  # the counts change on the store's thread while a turn copies them
    )
