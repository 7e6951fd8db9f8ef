"""How `PostgresAuditSink` reads a chain's head and writes rows after it, on any connection.

- `KnownHead`: the head row as the sink last wrote or read it, shared by the sink's appends on
  every event loop (and its synchronous reads), so each is guarded by one lock.
- `stored_head`: the head row and where the next row goes, as the database holds them now.
- `put`: one transaction that chains rows after a head, moves the head row from it and inserts
  them: one round trip after a known head, two after a head read under the row's lock.

``middleware/audit/_postgres.py`` says how these serialise appends across processes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._chain import GENESIS_HASH, AuditEntry, AuditHead, AuditRow
from ._key import AuditKey
from ._postgres_schema import (
    ENSURE,
    HEAD,
    INSERT,
    LAST,
    MOVE_FROM,
    StoredHead,
    chain_rows,
    found_head,
    move_from_params,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["KnownHead", "put", "stored_head"]


class KnownHead:
    """The head row a sink last wrote or read, and whether a store's transaction moved it since.

    Appends on several loops finish in any order: a head only replaces a lower one.
    """

    __slots__ = ("_head", "_lock", "_stale", "_stored")

    def __init__(self) -> None:
        """Nothing known yet: the genesis head, no head row."""
        self._lock = threading.Lock()
        self._stored: StoredHead | None = None
        self._head = AuditHead(0, GENESIS_HASH)
        self._stale = False

    @property
    def head(self) -> AuditHead:
        """Where the next row goes, as last known."""
        return self._head

    def current(self) -> tuple[StoredHead, AuditHead] | None:
        """The head row and where rows go; None when a write must read it under the row's lock.

        None when nothing is known yet, or a store's transaction wrote rows since (`mark_stale`).
        """
        with self._lock:
            if self._stored is None or self._stale:
                self._stale = False  # the write that reads it under the lock is up to date
                return None
            return self._stored, self._head

    def advance(self, stored: StoredHead | None, head: AuditHead, *, read: bool = False) -> None:
        """Keep a head written (or, with ``read``, read) unless a later one is known already."""
        with self._lock:
            known = self._stored
            if known is None or stored is None or stored[0] > known[0] - read:
                self._stored, self._head = stored, head

    def mark_stale(self) -> None:
        """Rows were written in a store's transaction: read the head again before using it."""
        with self._lock:
            self._stale = True

    def take_stale(self) -> bool:
        """Whether the head must be read again (the mark is cleared: `mark_stale` to restore)."""
        with self._lock:
            stale, self._stale = self._stale, False
            return stale


async def stored_head(
    conn: AsyncConnection[tuple[Any, ...]], chain: str, key: AuditKey | None, *, lock: bool
) -> tuple[StoredHead | None, AuditHead]:
    """The head row and where the next row goes, as the database holds them now.

    With ``lock`` (in a transaction, after ``ENSURE``), the chain's head row is locked until
    the transaction ends: this serialises appends to one chain across processes. The head
    and the last row are read by two statements sent together; in READ COMMITTED the second
    one starts after the lock is granted, so it sees the rows of the append that held it.
    """
    head = await conn.execute(HEAD + (" FOR UPDATE" if lock else ""), (chain,))
    tail = await conn.execute(LAST, (chain,))
    stored = await head.fetchone()
    found = found_head(stored, await tail.fetchone(), key)
    if stored is None:
        return None, found
    return (int(stored[0]), str(stored[1]), stored[2]), found


async def put(
    conn: AsyncConnection[tuple[Any, ...]],
    chain: str,
    key: AuditKey | None,
    entries: Sequence[AuditEntry],
    known: tuple[StoredHead, AuditHead] | None,
) -> tuple[list[AuditRow], StoredHead]:
    """Chain ``entries`` after a head, move the head row from it, insert them, commit.

    The head is ``known`` (the head row and where rows go) or, if None, read under the
    head row's lock. One pipeline and one cursor, one ``BEGIN``/``COMMIT``: one round trip with
    a known head, two otherwise. Returns the rows and the head row as committed.

    Raises:
        psycopg.errors.NotNullViolation: the head row no longer holds ``known`` (``MOVE_FROM``);
            psycopg.errors.UniqueViolation: a row took the index first. Nothing was written.
    """
    from psycopg import Error

    try:
        async with conn.pipeline() as pipeline, conn.cursor() as cur:
            try:
                await cur.execute("BEGIN")
                if known is None:  # a head row to lock (MOVE_FROM puts one back itself)
                    await cur.execute(ENSURE, (chain, GENESIS_HASH))
                    stored, after = await stored_head(conn, chain, key, lock=True)
                    assert stored is not None  # ENSURE made the row, and we hold its lock
                else:
                    stored, after = known
                rows, values = chain_rows(chain, entries, after, key)
                head = AuditHead(rows[-1].index + 1, rows[-1].hash)
                sealed_by = None if key is None else key.head_seal(head)
                moved = (head.count, head.hash, sealed_by)
                await cur.execute(MOVE_FROM, move_from_params(stored, after.count, moved, chain))
                if len(values) == 1:
                    await cur.execute(INSERT, values[0])
                else:
                    await cur.executemany(INSERT, values)
                await cur.execute("COMMIT")
            except Error:  # a statement failed before the end: settle the aborted
                with contextlib.suppress(Error):  # pipeline here (its exit would log it)
                    await pipeline.sync()
                raise
    except BaseException:
        with contextlib.suppress(Exception):  # a broken connection is re-opened by the next
            await conn.rollback()  # ends the failed transaction (nothing was written)
        raise
    return rows, moved
