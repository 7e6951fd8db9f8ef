"""The SQLite audit table: its columns, its head row, and the migration from the first layout.

The rows live in ``audit_rows`` (``idx INTEGER PRIMARY KEY``, the entry's columns, ``prev_hash`` and
``hash``; ``head_count`` is NULL). The chain's head (count and last hash, so that rows cut from the
end are detected) is the table's last row: ``head_count`` and ``idx`` are the count, ``hash`` is the
last row's hash, and every other column is NULL (a chained row always has a ``prev_hash``). The
count is kept apart from ``idx`` so that renumbering rows does not move it. An append turns that
head row into its first row (`SQL_TAKE_HEAD`) and adds the new head after its last. Both land on the
table's rightmost page, the page the append writes anyway, so a commit writes one WAL frame, where a
head kept in a table of its own added a second page to every commit (about a third more per one-row
append; ``bench/audit_chain.py``). A log without its head row has had its end deleted: ``verify()``
reports the rows from there on, and keeps doing so after more appends (`stored_head`).

Schema version 1 kept the head in a one-row table ``audit_head``; opening such a file moves the head
into ``audit_rows`` (`migrate`) and drops that table. Version 3 adds the columns ``ran`` (0 or 1)
and ``decisions`` (canonical JSON text); rows written before keep them NULL, and their hashes,
which never covered them, still verify (``middleware/audit/_chain.py``). Version 4 adds
``head_seal``: a keyed log's head row carries its seal (``middleware/audit/_key.py``), so a cut end
with a rewritten head row is found; it is NULL on every other row and in unkeyed logs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from ._chain import (
    GENESIS_HASH,
    AuditEntry,
    AuditHead,
    AuditRow,
    entry_from_fields,
    entry_to_fields,
)
from ._key import AuditKey, sealed
from ._seal import seal_fields

__all__ = [
    "SQL_COLUMNS",
    "SQL_INSERT",
    "SQL_PUT_HEAD",
    "SQL_SELECT",
    "SQL_TAKE_HEAD",
    "SQL_VERSION",
    "chain_values",
    "migrate",
    "put_head",
    "resume",
    "row_from_values",
    "split_head",
    "sql_values",
    "stored_head",
]

SQL_COLUMNS = (
    "kind",
    "turn_id",
    "conversation_id",
    "recorded_at",
    "call_id",
    "tool",
    "checksum",
    "args",
    "is_error",
    "duration_ms",
    "decision",
    "policy",
    "reason",
    "status",
    "error",
    "input",
    "ran",
    "decisions",
)
SQL_VERSION: Final = 4
"""The audit schema version, kept in ``audit_migrations`` (apart from a `SqliteStore`'s own
``schema_migrations``, so both can share one file)."""

_ROWS = """CREATE TABLE audit_rows (
    idx INTEGER PRIMARY KEY, kind TEXT, turn_id TEXT, conversation_id TEXT,
    recorded_at TEXT, call_id TEXT, tool TEXT, checksum TEXT, args TEXT, is_error,
    duration_ms, decision TEXT, policy TEXT, reason TEXT, status TEXT, error TEXT,
    input TEXT, prev_hash TEXT, hash TEXT, head_count INTEGER, ran INTEGER, decisions TEXT,
    head_seal TEXT
)"""
_ALL = ("idx", *SQL_COLUMNS, "prev_hash", "hash")
_MARKS = ", ".join("?" * len(_ALL))
SQL_INSERT: Final = f"INSERT INTO audit_rows ({', '.join(_ALL)}) VALUES ({_MARKS})"
SQL_SELECT: Final = f"SELECT {', '.join(_ALL)}, head_count, head_seal FROM audit_rows"
"""Every column of a row, ``head_count`` and ``head_seal`` last (see `split_head`)."""
SQL_PUT_HEAD: Final = (
    "INSERT INTO audit_rows (idx, head_count, hash, head_seal) VALUES (?1, ?1, ?2, ?3)"
)
"""The head row: count, last hash, seal (None in an unkeyed log; see `put_head`)."""
_PUT_OLD_HEAD = "INSERT INTO audit_rows (idx, head_count, hash) VALUES (?1, ?1, ?2)"
SQL_TAKE_HEAD: Final = (
    "UPDATE audit_rows SET "
    + ", ".join(f"{c} = ?" for c in _ALL[1:])
    + ", head_count = NULL, head_seal = NULL "
    "WHERE idx = ? AND prev_hash IS NULL AND head_count = idx AND hash = ?"
)
"""Turns the head row into the first new row: the row's values (its index last), then the hash
the head must hold. It changes one row exactly when the head in the file is the one expected
(see ``SqliteAuditSink._append_locked``)."""


def resume(last: AuditHead | None, stored: AuditHead | None) -> AuditHead:
    """Where appends continue: after the stored head unless rows were written past it.

    Continuing after the stored head even when rows are missing from the end keeps that
    truncation detectable: the next row's index and ``prev_hash`` do not fit the rows before it.
    """
    if stored is not None and (last is None or stored.count >= last.count):
        return stored
    return last or AuditHead(0, GENESIS_HASH)


def put_head(
    cur: sqlite3.Connection | sqlite3.Cursor, head: AuditHead, key: AuditKey | None
) -> None:
    """Write the head row (sealed under ``key``, if any)."""
    seal = None if key is None else key.head_seal(head)
    cur.execute(SQL_PUT_HEAD, (head.count, head.hash, seal))


def _head_of(values: Sequence[Any]) -> AuditHead | None:
    """The head that `SQL_SELECT`'s ``values`` hold, when they are a head row."""
    count, digest = values[-2], values[-3]
    if type(count) is int and type(digest) is str and all(v is None for v in values[1:-3]):
        return AuditHead(count, digest)
    return None


def split_head(
    values: list[tuple[Any, ...]],
) -> tuple[list[tuple[Any, ...]], AuditHead | None, str | None]:
    """The chained rows (as ``idx, *SQL_COLUMNS, prev_hash, hash``), the head and its seal.

    ``values``: the whole table read with `SQL_SELECT` in ``idx`` order. The head is the last
    row when it has the head's shape; without one (the end of the log was deleted) it is None.
    Any other row is a chained row, where a head-shaped one does not parse: `verify` reports it.
    """
    head = _head_of(values[-1]) if values else None
    seal = None
    if head is not None:
        seal = values[-1][-1] if isinstance(values[-1][-1], str) else None
        values = values[:-1]
    return [v[:-2] for v in values], head, seal


def stored_head(conn: sqlite3.Connection | sqlite3.Cursor, key: AuditKey | None) -> AuditHead:
    """Where the next row goes, as the file holds it now (inside a transaction).

    A log always has its head row (`migrate` writes the first), so a log without one has lost
    its end: the next row then goes one index past the last row, and the gap keeps the loss
    in sight for `verify_rows` (as `resume` keeps a cut before the head in sight). With a key,
    a head row the key did not seal is no head row.
    """
    top = conn.execute(SQL_SELECT + " ORDER BY idx DESC LIMIT 1").fetchone()
    if top is None:  # no head row and no rows: the whole log was deleted
        return AuditHead(1, GENESIS_HASH)
    stored = _head_of(top)
    if stored is not None and key is not None and not sealed(key, stored, top[-1]):
        top = conn.execute(
            SQL_SELECT + " WHERE idx < ? ORDER BY idx DESC LIMIT 1", (top[0],)
        ).fetchone()
        if top is None:  # an empty log's first head, or every row deleted
            return AuditHead(0 if stored.count == 0 else 1, GENESIS_HASH)
        stored = None
    if stored is None:
        return AuditHead(int(top[0]) + 2, str(top[-3]))
    last = conn.execute(
        "SELECT idx, hash FROM audit_rows WHERE idx < ? ORDER BY idx DESC LIMIT 1", (top[0],)
    ).fetchone()
    return resume(None if last is None else AuditHead(int(last[0]) + 1, str(last[1])), stored)


def migrate(conn: sqlite3.Connection, version: int, key: AuditKey | None) -> None:
    """Bring the audit tables from ``version`` (0: none yet) to `SQL_VERSION`.

    Runs in the caller's transaction, so a half-done migration is never committed. A new log's
    first head is sealed under ``key``, if any.
    """
    if version < 1:  # a new log: the current layout at once
        conn.execute(_ROWS)
        put_head(conn, AuditHead(0, GENESIS_HASH), key)
    elif version < 2:  # the head moves from audit_head to the last row of audit_rows
        last = conn.execute("SELECT idx, hash FROM audit_rows ORDER BY idx DESC LIMIT 1").fetchone()
        old = conn.execute("SELECT count, hash FROM audit_head WHERE id = 1").fetchone()
        head = resume(
            None if last is None else AuditHead(int(last[0]) + 1, str(last[1])),
            None if old is None else AuditHead(int(old[0]), str(old[1])),
        )
        conn.execute("ALTER TABLE audit_rows ADD COLUMN head_count INTEGER")
        conn.execute(_PUT_OLD_HEAD, (head.count, head.hash))
        conn.execute("DROP TABLE audit_head")
    if 0 < version < 3:  # a call's row says whether its handler ran and every decision about it
        conn.execute("ALTER TABLE audit_rows ADD COLUMN ran INTEGER")
        conn.execute("ALTER TABLE audit_rows ADD COLUMN decisions TEXT")
    if 0 < version < 4:  # a keyed log's head row carries its seal
        conn.execute("ALTER TABLE audit_rows ADD COLUMN head_seal TEXT")
    for step in range(version + 1, SQL_VERSION + 1):
        conn.execute("INSERT INTO audit_migrations VALUES (?, datetime('now'))", (step,))


def _sql_text(value: object) -> object:
    """SQLite text is UTF-8: a string with a lone surrogate is stored as its bytes instead."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass")
    return value


def sql_values(row: AuditRow) -> tuple[Any, ...]:
    """A row's stored values: ``idx``, `SQL_COLUMNS`, ``prev_hash``, ``hash``."""
    fields = entry_to_fields(row.entry)
    fields["is_error"] = int(row.entry.is_error)
    ran = row.entry.ran
    fields["ran"] = None if ran is None else int(ran)
    return (row.index, *(_sql_text(fields[c]) for c in SQL_COLUMNS), row.prev_hash, row.hash)


def chain_values(
    entries: Sequence[AuditEntry], head: AuditHead, key: AuditKey | None
) -> tuple[list[AuditRow], list[tuple[Any, ...]], int]:
    """Chain ``entries`` after ``head`` (under ``key``); return the rows and their values.

    The third value is the bytes of their hash texts: about what the rows take in the database.
    """
    rows, values, size, ascii_only = seal_fields(entries, head, key)
    if not ascii_only:  # some text may hold a lone surrogate (see _sql_text)
        values = [sql_values(row) for row in rows]
    return rows, values, size


def row_from_values(values: Sequence[Any]) -> AuditRow | None:
    """Re-create a row read back as ``index, *SQL_COLUMNS, prev_hash, hash`` (both SQL sinks).

    Text may come back as bytes (SQLite keeps text holding a lone surrogate as a blob, see
    ``_sql_text``; PostgreSQL keeps free text as ``bytea``). None when the row does not parse:
    a tampered or forged row.
    """
    fields = dict(zip(SQL_COLUMNS, values[1:-2], strict=True))
    for name, value in fields.items():
        if isinstance(value, bytes | memoryview):
            try:
                fields[name] = bytes(value).decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                return None
    flag, ran = fields["is_error"], fields["ran"]
    if type(flag) is not int or flag not in (0, 1):
        return None
    if ran is not None and (type(ran) is not int or ran not in (0, 1)):
        return None
    fields["is_error"] = bool(flag)
    fields["ran"] = None if ran is None else bool(ran)
    index, prev_hash, digest = values[0], values[-2], values[-1]
    if not (isinstance(prev_hash, str) and isinstance(digest, str)):
        return None
    try:
        return AuditRow(index, entry_from_fields(fields), prev_hash, digest)
    except ValueError:
        return None
