"""The PostgreSQL audit tables: their layout, their migrations, and the statements appends send.

``loopware.audit_rows`` holds every chain's rows (``chain``, ``idx``, the row's columns, free text
as ``bytea``); ``loopware.audit_chains`` one head row per chain (``count``, ``hash`` and, for a
keyed chain, its ``seal``). An append locks its chain's head row, chains after it and moves it
(``middleware/audit/_postgres.py``); `write_in` sends the same statements in a store's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from pipeline.errors import InvalidMiddlewareConfigError

from ._chain import (
    FREE_TEXT_FIELDS,
    GENESIS_HASH,
    AuditEntry,
    AuditHead,
    AuditRow,
)
from ._key import AuditKey, sealed
from ._seal import seal_fields
from ._sqlite_schema import SQL_COLUMNS

if TYPE_CHECKING:
    from psycopg.connection_async import AsyncConnection

__all__ = [
    "BYTEA",
    "COLUMNS",
    "ENSURE",
    "HEAD",
    "INSERT",
    "LAST",
    "MOVE",
    "MOVE_FROM",
    "SELECT",
    "VERSION",
    "StoredHead",
    "chain_rows",
    "found_head",
    "migrate",
    "move_from_params",
    "move_params",
    "write_in",
]

StoredHead = tuple[int, str, "str | None"]
"""A chain's head row as stored: ``count``, ``hash`` and ``seal`` (None when unkeyed)."""
COLUMNS = SQL_COLUMNS  # the same row columns as the SQLite sink, in the same order
BYTEA = FREE_TEXT_FIELDS  # kept as bytes: PostgreSQL text holds no NUL, no lone surrogate
VERSION = 3
_LOCK = 0x6C6F6F61  # "looa": the advisory lock key serialising audit migrations
_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS loopware",
    """CREATE TABLE loopware.audit_chains (
        chain text PRIMARY KEY, count bigint NOT NULL, hash text NOT NULL
    )""",
    """CREATE TABLE loopware.audit_rows (
        chain text NOT NULL, idx bigint NOT NULL, kind text, turn_id bytea,
        conversation_id bytea, recorded_at text, call_id bytea, tool bytea, checksum bytea,
        args bytea, is_error smallint, duration_ms double precision, decision text,
        policy bytea, reason bytea, status text, error bytea, input bytea, prev_hash text,
        hash text, PRIMARY KEY (chain, idx)
    )""",
)
INSERT = (
    "INSERT INTO loopware.audit_rows (chain, idx, "
    + ", ".join(COLUMNS)
    + ", prev_hash, hash) VALUES ("
    + ", ".join(["%s"] * (len(COLUMNS) + 4))
    + ")"
)
SELECT = (
    "SELECT idx, " + ", ".join(COLUMNS) + ", prev_hash, hash FROM loopware.audit_rows "
    "WHERE chain = %s ORDER BY idx"
)
LAST = "SELECT idx, hash FROM loopware.audit_rows WHERE chain = %s ORDER BY idx DESC LIMIT 1"
HEAD = "SELECT count, hash, seal FROM loopware.audit_chains WHERE chain = %s"
ENSURE = (
    "INSERT INTO loopware.audit_chains (chain, count, hash) VALUES (%s, 0, %s) "
    "ON CONFLICT (chain) DO NOTHING"
)
"""Makes sure there is a head row to lock (a new chain, or one deleted by hand)."""
MOVE = "UPDATE loopware.audit_chains SET count = %s, hash = %s, seal = %s WHERE chain = %s"
MOVE_FROM = (
    "INSERT INTO loopware.audit_chains AS head (chain, count, hash, seal) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT (chain) DO UPDATE SET count = CASE "
    "WHEN head.count = %s AND head.hash = %s AND head.seal IS NOT DISTINCT FROM %s "
    "AND NOT EXISTS (SELECT FROM loopware.audit_rows WHERE chain = %s AND idx >= %s) "
    "THEN EXCLUDED.count END, hash = EXCLUDED.hash, seal = EXCLUDED.seal"
)
"""``MOVE``, only from the head row the rows were chained after (with no row past it).

It locks the head row; if that row no longer holds the expected head (another writer moved it
since this process read it), ``count`` becomes NULL and its NOT NULL constraint fails the
statement, so the transaction rolls back with nothing written (`psycopg.errors.NotNullViolation`).
A head row deleted by hand is put back, at the new head (the rows went where this process
knew the chain ended: rows cut from the end stay missing, and found).
"""


_BYTEA_AT = tuple(i for i, name in enumerate(COLUMNS, start=2) if name in BYTEA)
"""Where the free-text fields sit in ``INSERT``'s parameters (after ``chain`` and ``idx``)."""


def chain_rows(
    chain: str, entries: Sequence[AuditEntry], head: AuditHead, key: AuditKey | None
) -> tuple[list[AuditRow], list[list[Any]]]:
    """Chain ``entries`` after ``head``; return the rows and their ``INSERT`` parameters.

    Each row is sealed and its stored values taken in one pass (`seal_fields`); free text is
    stored as UTF-8 with ``surrogatepass`` (``bytea``).
    """
    rows, values, _, _ = seal_fields(entries, head, key)
    params: list[list[Any]] = []
    for row in values:
        out = [chain, *row]
        for at in _BYTEA_AT:
            text = out[at]
            if text is not None:
                out[at] = text.encode("utf-8", "surrogatepass")
        params.append(out)
    return rows, params


def found_head(
    stored: tuple[Any, ...] | None, last: tuple[Any, ...] | None, key: AuditKey | None
) -> AuditHead:
    """Where the next row goes, from the head row (``HEAD``) and the last row (``LAST``).

    With a key, a head row the key did not seal is no head: the rows then continue one index
    past the last row, so that ``verify()`` keeps reporting the end as lost.
    """
    tail = None if last is None else AuditHead(int(last[0]) + 1, str(last[1]))
    head = None if stored is None else AuditHead(int(stored[0]), str(stored[1]))
    if key is not None and not sealed(key, head, None if stored is None else stored[2]):
        return _resume(None, None) if tail is None else AuditHead(tail.count + 1, tail.hash)
    return _resume(tail, head)


def move_params(head: AuditHead, key: AuditKey | None, chain: str) -> tuple[Any, ...]:
    """``MOVE``'s parameters: the new head, sealed under ``key`` (if any)."""
    return (head.count, head.hash, None if key is None else key.head_seal(head), chain)


def move_from_params(
    stored: StoredHead, start: int, head: StoredHead, chain: str
) -> tuple[Any, ...]:
    """``MOVE_FROM``'s parameters: the head row from ``stored`` to ``head``.

    ``start`` is the index of the first row chained after ``stored``: no row may be there yet.
    """
    return (chain, *head, *stored, chain, start)


async def write_in(
    connection: object,
    chain: str,
    entries: Sequence[AuditEntry],
    key: AuditKey | None,
    written: list[AuditHead],
) -> None:
    """Append ``entries`` to ``chain`` in a `PostgresStore`'s transaction; note the new head.

    Lock the head row, chain the rows after it, move it: `PostgresAuditSink._write`'s
    statements, on the store's connection.
    """
    # PostgresStore passes its transaction's AsyncConnection (see pipeline.stores.JointStore)
    conn = cast("AsyncConnection[tuple[Any, ...]]", connection)
    await conn.execute(ENSURE, (chain, GENESIS_HASH))
    head = await conn.execute(HEAD + " FOR UPDATE", (chain,))
    tail = await conn.execute(LAST, (chain,))
    after = found_head(await head.fetchone(), await tail.fetchone(), key)
    rows, values = chain_rows(chain, entries, after, key)
    async with conn.cursor() as cur:
        await cur.executemany(INSERT, values)
    new = AuditHead(rows[-1].index + 1, rows[-1].hash)
    await conn.execute(MOVE, move_params(new, key, chain))
    written.append(new)


def _resume(last: AuditHead | None, stored: AuditHead | None) -> AuditHead:
    """Where appends continue: after the stored head unless rows were written past it.

    (As the SQLite sink does: continuing after the stored head even when rows are missing from
    the end keeps that truncation detectable.)
    """
    if stored is not None and (last is None or stored.count >= last.count):
        return stored
    return last or AuditHead(0, GENESIS_HASH)


async def migrate(conn: AsyncConnection[tuple[Any, ...]]) -> None:
    """Bring the audit tables to `VERSION` (in the caller's transaction, under an advisory lock).

    Raises:
        InvalidMiddlewareConfigError: the tables were written by a newer loopware.
    """
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
    await conn.execute("CREATE SCHEMA IF NOT EXISTS loopware")
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS loopware.audit_migrations "
        "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    found = await conn.execute("SELECT MAX(version) FROM loopware.audit_migrations")
    row = await found.fetchone()
    version = int(row[0] or 0) if row is not None else 0
    if version > VERSION:
        raise InvalidMiddlewareConfigError(
            f"PostgresAuditSink: the database has audit schema version {version}, newer "
            f"than this loopware's {VERSION}"
        )
    if version < 1:
        for statement in _SCHEMA:
            await conn.execute(statement)
    if version < 2:  # a call's row says whether its handler ran, and every decision
        await conn.execute(
            "ALTER TABLE loopware.audit_rows ADD COLUMN ran smallint, "
            "ADD COLUMN decisions bytea"
        )
    if version < 3:  # a keyed chain's head row carries its seal
        await conn.execute("ALTER TABLE loopware.audit_chains ADD COLUMN seal text")
    for step in range(version + 1, VERSION + 1):
        await conn.execute("INSERT INTO loopware.audit_migrations (version) VALUES (%s)", (step,))
