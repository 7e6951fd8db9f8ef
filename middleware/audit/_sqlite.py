"""`SqliteAuditSink` (the default audit sink) and what every built-in sink shares.

The built-in sinks (this one and `JsonlAuditSink`) never make the event loop wait on disk or
on a lock, and chain appends strictly in the order ``append`` was called, whichever turn they
come from (``middleware/audit/_writer.py``). ``synchronous="full"`` (the default) makes every
append survive power loss (SQLite ``synchronous=FULL``; ``fdatasync`` for JSON Lines): appends
are written by the sink's writer thread, and appends queued while it is busy are written
together, in one transaction (one ``fsync``), each append still getting its own rows: `AuditLog`
appends a row per stored call, and this group commit keeps that as cheap as one append per
iteration. (A failed write fails every append of its group.) ``"normal"`` survives a process
kill: nothing waits for the disk, so an append is written at once on the calling thread (one
transaction, no ``fsync``; automatic WAL checkpoints, which do sync, are run by the writer
thread instead), unless another writer holds the database's write lock: then it goes to the
writer thread, which waits for the lock. ``rows()``, ``head()`` and ``verify()`` are
synchronous: they wait for queued appends first.

The chain's head is kept in memory, read on opening; each append checks it in its own
transaction, under the write lock, at no extra cost (see ``SqliteAuditSink._append_locked``), and
chains after what the file holds when another connection wrote since. In the file, the head is
the last row of ``audit_rows`` (``middleware/audit/_sqlite_schema.py``).

Rows can also be written inside another connection's transaction on the same file: a
`SqliteStore` on it runs the sink's `SqliteAuditSink.joint` writer in the transaction that
stores a call, so the call and its row commit together. Holding the write lock already, the
writer chains after the head the file holds (`stored_head`); once it committed, the head in
memory is read again before it is next handed out.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Sequence
from typing import Any, Literal

from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stores import TransactionWriter

from ._anchor import AuditAnchor, check_anchor
from ._chain import (
    GENESIS_HASH,
    AuditEntry,
    AuditHead,
    AuditRow,
)
from ._joint import JointRows
from ._key import AuditKey, check_chain_key, check_key
from ._report import AuditVerification
from ._seal import new_head
from ._sqlite_schema import (
    SQL_INSERT,
    SQL_SELECT,
    SQL_TAKE_HEAD,
    SQL_VERSION,
    chain_values,
    migrate,
    put_head,
    row_from_values,
    split_head,
    stored_head,
)
from ._verify import report, verify_log
from ._writer import ChainWriter

__all__ = ["SqliteAuditSink", "Synchronous", "check_options"]

Synchronous = Literal["full", "normal"]


def check_options(owner: str, path: object, synchronous: object) -> str:
    bad: list[str] = []
    if not isinstance(path, str | os.PathLike) or not os.fspath(path):
        bad.append(f"path must be a non-empty str or path, got {path!r}")
    if synchronous not in ("full", "normal"):
        bad.append(f"synchronous must be 'full' or 'normal', got {synchronous!r}")
    if bad:
        raise InvalidMiddlewareConfigError(f"{owner}: " + "; ".join(bad))
    assert isinstance(path, str | os.PathLike)
    return os.fspath(path)


class SqliteAuditSink:
    """An audit chain in an SQLite table (WAL; each append is one transaction).

    Args:
        path: The database file (created when missing). It may be the same file as a
            `SqliteStore` (the tables do not clash) or as other sinks, in this process or
            another: each append chains after the rows the file holds at that moment.
        synchronous: ``"full"`` (default) or ``"normal"`` (see the module docstring).
        key: Chain the rows under this key (``middleware/audit/_key.py``); the head row is
            sealed with it. A log stays in the mode it was started in.
        anchor: Also hand every new head to this callable (``middleware/audit/_anchor.py``).

    Raises:
        InvalidMiddlewareConfigError: a bad option, or a file that is not an SQLite database.
        AuditKeyError: ``key`` is not an `AuditKey`.
        AuditKeyMismatchError: the log was chained under another key, or in the other mode.
    """

    __slots__ = (
        "_anchor",
        "_conn",
        "_cursor",
        "_database",
        "_fast",
        "_fast_cursor",
        "_head",
        "_key",
        "_path",
        "_stale",
        "_unchecked",
        "_writer",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "full",
        key: AuditKey | None = None,
        anchor: AuditAnchor | None = None,
    ) -> None:
        """Open (or create) the chain; see the class docstring."""
        self._path = check_options("SqliteAuditSink", path, synchronous)
        self._key = check_key("SqliteAuditSink", key)
        self._anchor = check_anchor("SqliteAuditSink", anchor)
        memory = self._path == ":memory:" or self._path.startswith("file::memory:")
        self._database = None if memory else "sqlite:" + os.path.realpath(self._path)
        self._stale = False  # rows were written in another connection's transaction since
        self._conn: sqlite3.Connection | None = None
        self._fast: sqlite3.Connection | None = None  # the calling thread's ("normal" only)
        self._cursor: sqlite3.Cursor | None = None  # one cursor per connection, reused
        self._fast_cursor: sqlite3.Cursor | None = None
        self._head = AuditHead(0, GENESIS_HASH)
        self._unchecked = 0  # WAL pages (roughly) the calling thread wrote since a checkpoint
        normal = synchronous == "normal"
        self._writer = ChainWriter(
            "loopware-audit", self._write, self._try_write if normal else None
        )
        try:
            self._writer.call(self._open, synchronous)
        except InvalidMiddlewareConfigError:
            self._writer.close(self._close)
            raise
        except sqlite3.Error as exc:
            self._writer.close(self._close)
            raise InvalidMiddlewareConfigError(
                f"SqliteAuditSink: cannot open {self._path!r}: {exc}"
            ) from exc

    def __repr__(self) -> str:
        """Show the file and the number of rows appended so far."""
        return f"SqliteAuditSink({self._path!r}, rows={self._head.count})"

    def _open(self, synchronous: str) -> None:
        conn = self._conn = sqlite3.connect(
            self._path, isolation_level=None, timeout=30.0, check_same_thread=False
        )
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS audit_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            version = conn.execute("SELECT MAX(version) FROM audit_migrations").fetchone()[0] or 0
            if version > SQL_VERSION:
                raise InvalidMiddlewareConfigError(
                    f"SqliteAuditSink: {self._path!r} has audit schema version {version}, newer "
                    f"than this loopware's {SQL_VERSION}"
                )
            if version < SQL_VERSION:
                migrate(conn, version, self._key)
            self._head = stored_head(conn, self._key)
            check_chain_key("SqliteAuditSink", self._key, self._head)
        except BaseException:
            conn.rollback()
            raise
        conn.execute("COMMIT")
        self._cursor = conn.cursor()
        if synchronous == "normal":
            # Never waits: a busy write lock sends the append to the writer thread instead,
            # and this connection leaves checkpoints (which sync) to that thread.
            fast = self._fast = sqlite3.connect(
                self._path, isolation_level=None, timeout=0.0, check_same_thread=False
            )
            fast.execute("PRAGMA busy_timeout = 0")
            fast.execute("PRAGMA synchronous = NORMAL")
            fast.execute("PRAGMA wal_autocheckpoint = 0")
            self._fast_cursor = fast.cursor()

    @property
    def database(self) -> str | None:
        """``"sqlite:"`` and the file's real path, as `SqliteStore` names its database."""
        return self._database

    def joint(self, entries: Sequence[AuditEntry]) -> TransactionWriter:
        """``entries`` as rows written in a `SqliteStore`'s transaction on the same file.

        The store runs the writer with its transaction's cursor (holding the write lock): the
        rows chain after the head the file holds and commit with the store's write.
        """
        entries = tuple(entries)
        written: list[AuditHead] = []
        return JointRows(
            f"SqliteAuditSink({self._path!r})",
            lambda cur: written.append(self._write_in(cur, entries)),
            lambda: self._written_elsewhere(written),
        )

    def _write_in(self, cur: object, entries: Sequence[AuditEntry]) -> AuditHead:
        """Write ``entries`` in the store's transaction, which holds the write lock.

        As `_append_locked` does: the head in memory is a guess the file checks (the head row
        turns into the first row only if it is that head); when it is not, nothing was written
        and the rows chain after the head the file holds. A savepoint undoes a first row taken
        whose other rows cannot go in (a file tampered with), as the rollback does there.
        """
        if not isinstance(cur, sqlite3.Cursor):
            raise TypeError(f"SQLite audit rows need an sqlite3.Cursor, not {cur!r}")
        old, key = self._head, self._key
        rows, values, _ = chain_values(entries, old, key)
        head = new_head(rows[-1])
        first = values[0]
        cur.execute("SAVEPOINT loopware_audit")
        try:
            taken = cur.execute(SQL_TAKE_HEAD, (*first[1:], first[0], old.hash)).rowcount == 1
            if taken:
                if len(values) > 1:
                    cur.executemany(SQL_INSERT, values[1:])
                put_head(cur, head, key)
        except sqlite3.IntegrityError:  # an index is taken
            cur.execute("ROLLBACK TO loopware_audit")
            taken = False
        if not taken:
            rows, values, _ = chain_values(entries, stored_head(cur, key), key)
            head = new_head(rows[-1])
            cur.execute(_SQL_DROP_HEAD)
            _insert(cur, values)
            put_head(cur, head, key)
        cur.execute("RELEASE loopware_audit")
        return head

    def _written_elsewhere(self, written: list[AuditHead]) -> None:
        """Rows were committed by another connection: read the head again before handing it out.

        The head they left is the next write's guess (appends check it against the file).
        """
        self._stale = True
        if written:
            self._head = written[-1]
            if self._anchor is not None:  # (the store ignores an exception from it)
                self._anchor(written[-1])

    def _current_head(self) -> AuditHead:
        """The head as written so far, read from the file if rows were written elsewhere."""
        if self._stale:
            self._stale = False  # before reading: a later joint write sets it again
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                self._head = stored_head(conn, self._key)
            finally:
                conn.execute("COMMIT")
        return self._head

    def _close(self) -> None:
        for conn in (self._fast, self._conn):
            if conn is not None:
                conn.close()
        self._conn = self._fast = self._cursor = self._fast_cursor = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError("the audit sink is closed")
        return self._conn

    def _write(self, entries: Sequence[AuditEntry]) -> list[AuditRow]:
        """Append in one transaction, waiting for the write lock (the writer thread)."""
        cur = self._cursor
        if cur is None:
            raise ValueError("the audit sink is closed")
        cur.execute("BEGIN IMMEDIATE")
        return self._append_locked(cur, entries)[0]

    def _try_write(self, entries: Sequence[AuditEntry]) -> list[AuditRow] | None:
        """Append now unless another writer holds the lock: then None (the calling thread)."""
        cur = self._fast_cursor
        if cur is None:
            raise ValueError("the audit sink is closed")
        try:
            cur.execute("BEGIN IMMEDIATE")
            rows, size = self._append_locked(cur, entries)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in _BUSY:
                raise
            return None  # rolled back: nothing written; the writer thread waits for the lock
        self._unchecked += 1 + size // _PAGE  # the rows' pages (the head's among them)
        if self._unchecked >= _CHECKPOINT_PAGES:
            self._unchecked = 0
            self._writer.submit(self._checkpoint)
        return rows

    def _checkpoint(self) -> None:
        """Copy the WAL into the database, so that the next commit starts it over.

        The writer thread runs it holding the storage, so it completes: no append writes
        meanwhile (appends made then wait for it on the writer thread).
        """
        if self._conn is not None:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _append_locked(
        self, cur: sqlite3.Cursor, entries: Sequence[AuditEntry]
    ) -> tuple[list[AuditRow], int]:
        """Write ``entries`` in the transaction just begun (holding the write lock); commit.

        Returns the rows and about how many bytes they take (`chain_values`).

        The head in memory is checked by the writes themselves, at no extra cost: the first
        row takes the place of the head row only if that is the head in memory
        (`SQL_TAKE_HEAD` changes one row), and the other rows' and the new head's indexes
        are primary keys (taken if another connection appended). When a check fails, the
        transaction is rolled back and the append, in a new one, chains after what the file
        holds now (as on opening).
        """
        key = self._key
        try:
            old = self._head
            rows, values, size = chain_values(entries, old, key)
            head = new_head(rows[-1])
            first = values[0]
            fresh = cur.execute(SQL_TAKE_HEAD, (*first[1:], first[0], old.hash)).rowcount == 1
            if fresh:
                try:
                    if len(values) > 1:
                        cur.executemany(SQL_INSERT, values[1:])
                    put_head(cur, head, key)
                except sqlite3.IntegrityError:  # an index is taken
                    fresh = False
            if not fresh:
                # Another connection (another sink on this file, here or in another process)
                # wrote since, or the head row is missing: chain after what the file holds now.
                cur.connection.rollback()
                cur.execute("BEGIN IMMEDIATE")
                stored = stored_head(cur, key)
                rows, values, size = chain_values(entries, stored, key)
                head = new_head(rows[-1])
                cur.execute(_SQL_DROP_HEAD)
                _insert(cur, values)
                put_head(cur, head, key)
            cur.execute("COMMIT")
        except BaseException:
            if cur.connection.in_transaction:
                cur.connection.rollback()
            raise
        self._head = head
        if self._anchor is not None:
            self._anchor(head)
        return rows, size

    def _read(self) -> tuple[list[AuditRow | None], AuditHead | None, str | None]:
        """Every row, the head row's head and its seal."""
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            values = conn.execute(SQL_SELECT + " ORDER BY idx").fetchall()
        finally:
            conn.execute("COMMIT")
        values, stored, seal = split_head(values)
        return [row_from_values(v) for v in values], stored, seal

    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Queue ``entries`` as the next rows; the future completes once they are committed."""
        return self._writer.append(entries)

    def rows(self) -> list[AuditRow]:
        """Return every row in chain order.

        Raises:
            ValueError: a row does not parse (it was tampered with; `verify` locates it).
        """
        rows, _, _ = self._writer.call(self._read)
        for i, row in enumerate(rows):
            if row is None:
                raise ValueError(f"audit row {i} of {self._path!r} is malformed")
        return [row for row in rows if row is not None]

    def head(self) -> AuditHead:
        """Return the head as written so far (keep a copy elsewhere to anchor the chain)."""
        return self._writer.call(self._current_head)

    def verify(self, *, head: AuditHead | None = None) -> AuditVerification:
        """Check the chain: the report is truthy when it holds, else names the first bad row.

        Without its head row the log has lost its end (rows may be missing after the last
        one): the number of rows is reported (``E_AUDIT_HEAD_MISSING``), as for rows missing
        from the end. With a key, every row must be the key's and the head row sealed by it.

        Args:
            head: A head saved earlier (`head`, an anchor); by default the one stored with the
                rows (with a key, both are checked).
        """
        rows, stored, seal = self._writer.call(self._read)
        found = verify_log(rows, stored, key=self._key, seal=seal, given=head)
        if found and head is None and stored is None:
            # the head row was deleted: so may rows after these have been
            return report((len(rows), "E_AUDIT_HEAD_MISSING"), len(rows))
        return found

    def close(self) -> None:
        """Finish queued appends and close the database (idempotent)."""
        self._writer.close(self._close)


def _insert(cur: sqlite3.Cursor, values: list[tuple[Any, ...]]) -> None:
    if len(values) == 1:
        cur.execute(SQL_INSERT, values[0])
    else:
        cur.executemany(SQL_INSERT, values)


_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_CHECKPOINT_PAGES = 1000
_PAGE = 4096  # SQLite's default page size, which the sink leaves as it is
"""Checkpoint the WAL after about this many pages written by the calling thread (SQLite's own
automatic checkpoint threshold)."""
_SQL_DROP_HEAD = (
    "DELETE FROM audit_rows WHERE idx = (SELECT MAX(idx) FROM audit_rows) "
    "AND prev_hash IS NULL AND head_count IS NOT NULL"
)
"""Removes the head row (the last row, when it is one): the append writes a new one."""


for _cls in (SqliteAuditSink,):
    _cls.__module__ = "middleware.audit"
