"""Moving artifact bodies that `SqliteStore` kept in its rows (schema 2 and before) to the spool.

Before schema version 3 a stored artifact's whole body was a column of its result part, and
loading the call read it whole into memory. When a store opens a database it has just migrated
from such a version, `externalise_bodies` moves every such body larger than `INLINE_MAX` into
the store's spool, streaming it out of SQLite through a blob handle (1 MiB at a time), then
points the part at its spool key and clears the column, one transaction per body. A crash in
between leaves an orphaned copy in the spool, never a part without its body. Bodies that hold a
lone surrogate (stored as a BLOB) cannot pass through a file spool unchanged and stay in their
row, as new ones do (see `pipeline.stores._body_refs`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ._body_refs import INLINE_MAX, owned_key
from ._sqlite_codec import from_sql_text

if TYPE_CHECKING:
    from ._spool import SpoolStore

__all__ = ["externalise_bodies"]

_CHUNK = 1 << 20
_FIND = (
    "SELECT r.rowid, c.conversation_id, c.turn_id, c.id, r.position "
    "FROM tool_call_results r JOIN tool_calls c ON c.seq = r.call_seq "
    "WHERE r.kind = 'artifact' AND r.spool_key IS NULL AND typeof(r.text) = 'text' "
    "AND length(CAST(r.text AS BLOB)) > ? ORDER BY r.rowid"
)


def _chunks(conn: sqlite3.Connection, rowid: int) -> Iterator[bytes]:
    with conn.blobopen("tool_call_results", "text", rowid, readonly=True) as blob:
        while data := blob.read(_CHUNK):
            yield data


def externalise_bodies(conn: sqlite3.Connection, spool: Callable[[], SpoolStore]) -> int:
    """Move the large inline bodies of ``conn``'s database to the spool; return how many.

    ``conn`` must be in autocommit mode with no transaction open; ``spool`` is called only when
    there is a body to move (so a database without one never creates the default spool).
    """
    found = conn.execute(_FIND, (INLINE_MAX,)).fetchall()
    for rowid, conversation_id, turn_id, call_id, position in found:
        store = spool()
        key = owned_key(
            None if conversation_id is None else from_sql_text(conversation_id),
            from_sql_text(turn_id),
            from_sql_text(call_id),
            position,
        )
        write_chunks = getattr(store, "write_chunks", None)
        if callable(write_chunks):
            write_chunks(key, _chunks(conn, rowid))
        else:  # a spool without streaming writes gets the body whole
            store.write(key, b"".join(_chunks(conn, rowid)))
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "UPDATE tool_call_results SET spool_key = ?, text = NULL WHERE rowid = ?",
                (key, rowid),
            )
        except BaseException:
            conn.rollback()
            raise
        conn.execute("COMMIT")
    return len(found)
