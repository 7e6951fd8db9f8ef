"""`PostgresAuditSink`: an audit chain in PostgreSQL that many processes append to at once.

The chain stays linear across processes because appends are serialised **in the database**, per
chain: an append locks its chain's head row (``SELECT ... FOR UPDATE`` on
``loopware.audit_chains``), chains its rows after the head it finds there, inserts them and moves
the head, in one transaction. A second process appending to the same chain waits on that row
lock, then sees the new head; chains with different names never wait on each other. Nothing in
the process has to coordinate, so any number of workers (and `AuditLog`s) can share a chain.

Like the built-in sinks, each sink runs its I/O on one worker thread of its own (over one psycopg
connection, re-opened if it breaks): the event loop never waits on the network, and this
process's appends are chained in the order ``append`` was called; appends queued while the
thread is busy are written in one transaction. Free text is stored as ``bytea`` (UTF-8 with
``surrogatepass``: PostgreSQL ``text`` holds no NUL and no lone surrogate); read one in SQL with
``convert_from(column, 'UTF8')``. The tables live in the ``loopware`` schema beside
`pipeline.stores.PostgresStore`'s, with their own ``audit_migrations``. psycopg is imported when
a sink is created, never by ``import middleware`` (extra ``loopware[postgres]``).

Rows can also be written inside a `PostgresStore`'s transaction on the same database
(`PostgresAuditSink.joint`): the store runs the writer in the transaction that stores a call,
so the call and its row commit together; the writer locks the chain's head row and chains its
rows after it exactly as an append does (the same statements, sent on the store's connection).

With a key (``middleware/audit/_key.py``) the rows are keyed and the head row in
``loopware.audit_chains`` carries its seal (column ``seal``, audit schema 3).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from pipeline.errors import InvalidMiddlewareConfigError, MissingExtraError
from pipeline.stores import TransactionWriter

from ._anchor import AuditAnchor, check_anchor
from ._chain import (
    GENESIS_HASH,
    AuditEntry,
    AuditHead,
    AuditRow,
    seal,
)
from ._joint import JointRows
from ._key import AuditKey, check_chain_key, check_key
from ._postgres_schema import (
    ENSURE,
    HEAD,
    INSERT,
    LAST,
    MOVE,
    SELECT,
    found_head,
    migrate,
    move_params,
    row_values,
    write_in,
)
from ._report import AuditVerification
from ._sqlite_schema import row_from_values
from ._verify import verify_log

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresAuditSink"]

P = ParamSpec("P")
R = TypeVar("R")

def _database_of(info: Any) -> str:
    """How `PostgresStore` names the database a connection reaches (``connection.info``)."""
    return f"postgresql:host={info.host} port={info.port} dbname={info.dbname} user={info.user}"


def _settle(done: Future[list[AuditRow]], outcome: list[AuditRow] | BaseException) -> None:
    try:
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)
    except InvalidStateError:  # the caller stopped waiting; the rows are written all the same
        pass


class PostgresAuditSink:
    """An audit chain in PostgreSQL, safe for many processes appending at once.

    Args:
        conninfo: A libpq connection string or URL.
        chain: The chain's name: sinks (in any process) with the same name append to one
            chain; different names are independent chains in the same tables.
        timeout: Seconds to wait when connecting.
        key: Chain the rows under this key (``middleware/audit/_key.py``); the chain's head
            row is sealed with it. A chain stays in the mode it was started in.
        anchor: Also hand every new head this sink writes to this callable
            (``middleware/audit/_anchor.py``).

    Raises:
        InvalidMiddlewareConfigError: a bad option, a server that cannot be reached, or audit
            tables written by a newer loopware.
        AuditKeyError: ``key`` is not an `AuditKey`.
        AuditKeyMismatchError: the chain was made under another key, or in the other mode.
    """

    __slots__ = (
        "_anchor",
        "_chain",
        "_closed",
        "_conn",
        "_conninfo",
        "_database",
        "_executor",
        "_head",
        "_key",
        "_lock",
        "_queued",
        "_stale",
        "_timeout",
    )

    def __init__(
        self,
        conninfo: str,
        *,
        chain: str = "default",
        timeout: float = 30.0,
        key: AuditKey | None = None,
        anchor: AuditAnchor | None = None,
    ) -> None:
        """Connect, create or check the tables, and read the chain's head."""
        bad: list[str] = []
        given: tuple[object, object, object] = (conninfo, chain, timeout)  # checked at run time
        if not isinstance(given[0], str) or not given[0].strip():
            bad.append(f"conninfo must be a non-empty connection string, got {conninfo!r}")
        if not isinstance(given[1], str) or not given[1] or not given[1].isprintable():
            bad.append(f"chain must be a non-empty printable name, got {chain!r}")
        wait = given[2]
        if (
            isinstance(wait, bool)
            or not isinstance(wait, int | float)
            or not math.isfinite(wait)
            or wait <= 0
        ):
            bad.append(f"timeout must be a positive number of seconds, not {timeout!r}")
        if bad:
            raise InvalidMiddlewareConfigError("PostgresAuditSink: " + "; ".join(bad))
        try:
            import psycopg  # noqa: F401  (a missing extra is reported here, by name)
        except ImportError as exc:
            raise MissingExtraError(
                extra="postgres", package="psycopg", needed_by="PostgresAuditSink"
            ) from exc
        self._key = check_key("PostgresAuditSink", key)
        self._anchor = check_anchor("PostgresAuditSink", anchor)
        self._conninfo = conninfo
        self._chain = chain
        self._timeout = float(timeout)
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._head = AuditHead(0, GENESIS_HASH)
        self._database: str | None = None
        self._stale = False  # rows were written in a store's transaction since
        self._closed = False
        self._lock = threading.Lock()
        self._queued: list[tuple[tuple[AuditEntry, ...], Future[list[AuditRow]]]] = []
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopware-audit")
        try:
            self._executor.submit(self._open).result()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        """Show the chain and the number of rows appended so far."""
        return f"PostgresAuditSink(chain={self._chain!r}, rows={self._head.count})"

    @property
    def chain(self) -> str:
        """The chain's name."""
        return self._chain

    @property
    def database(self) -> str | None:
        """The database the sink writes to, as `PostgresStore` names its own (libpq's view)."""
        return self._database

    def joint(self, entries: Sequence[AuditEntry]) -> TransactionWriter:
        """``entries`` as rows written in a `PostgresStore`'s transaction on the same database.

        The store runs the writer with its transaction's ``AsyncConnection``: it locks the
        chain's head row, chains the rows after it and moves it, committing with the store.
        """
        chain, rows, key = self._chain, tuple(entries), self._key
        written: list[AuditHead] = []
        return JointRows(
            f"PostgresAuditSink(chain={chain!r})",
            lambda conn: write_in(conn, chain, rows, key, written),
            lambda: self._written_elsewhere(written),
        )

    def _written_elsewhere(self, written: list[AuditHead]) -> None:
        self._stale = True
        if written and self._anchor is not None:
            self._anchor(written[-1])

    # -- worker thread --------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        import psycopg

        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            conn.close()
        self._conn = psycopg.connect(
            self._conninfo, autocommit=True, connect_timeout=max(1, math.ceil(self._timeout))
        )
        return self._conn

    def _open(self) -> None:
        import psycopg

        try:
            conn = self._connect()
            self._migrate(conn)
            self._database = _database_of(conn.info)
        except psycopg.Error as exc:
            raise InvalidMiddlewareConfigError(f"PostgresAuditSink: cannot open: {exc}") from exc

    def _migrate(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        with conn.transaction():
            migrate(conn)
            self._head = self._stored_head(conn, lock=False)
            check_chain_key("PostgresAuditSink", self._key, self._head)

    def _stored_head(self, conn: psycopg.Connection[tuple[Any, ...]], *, lock: bool) -> AuditHead:
        """Where the next row goes, as the database holds it now (inside a transaction).

        With ``lock``, the chain's head row is locked until the transaction ends: this is what
        serialises appends to one chain across processes. The head and the last row are read
        by two statements sent together (one round trip in pipeline mode); in READ COMMITTED
        the second one starts after the lock is granted, so it sees the rows of the append
        that held the lock before.
        """
        if lock:
            conn.execute(ENSURE, (self._chain, GENESIS_HASH))
        head = conn.execute(HEAD + (" FOR UPDATE" if lock else ""), (self._chain,))
        tail = conn.execute(LAST, (self._chain,))
        return found_head(head.fetchone(), tail.fetchone(), self._key)

    def _write(self, entries: Sequence[AuditEntry]) -> list[AuditRow]:
        if not entries:
            return []
        conn = self._connect()
        # two round trips: lock and read the head, then write the rows, move the head, commit
        with conn.pipeline(), conn.transaction():
            rows = seal(entries, self._stored_head(conn, lock=True), self._key)
            head = AuditHead(rows[-1].index + 1, rows[-1].hash)
            with conn.cursor() as cur:
                cur.executemany(INSERT, [row_values(self._chain, row) for row in rows])
            conn.execute(MOVE, move_params(head, self._key, self._chain))
        self._head = head
        if self._anchor is not None:
            self._anchor(head)
        return rows

    def _drain(self) -> None:
        with self._lock:
            group, self._queued = self._queued, []
        try:
            rows = self._write([entry for entries, _ in group for entry in entries])
        except BaseException as exc:
            for _, done in group:
                _settle(done, exc)
            return
        start = 0
        for entries, done in group:
            _settle(done, rows[start : start + len(entries)])
            start += len(entries)

    def _read(self) -> tuple[list[AuditRow | None], AuditHead | None, str | None]:
        """Every row, the stored head and its seal."""
        conn = self._connect()
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            values = conn.execute(SELECT, (self._chain,)).fetchall()
            head = conn.execute(HEAD, (self._chain,)).fetchone()
        stored = None if head is None else AuditHead(int(head[0]), str(head[1]))
        sealed_by = None if head is None or not isinstance(head[2], str) else head[2]
        return [row_from_values(v) for v in values], stored, sealed_by

    def _call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        if self._closed:
            raise ValueError("the audit sink is closed")
        return self._executor.submit(fn, *args, **kwargs).result()

    # -- AuditSink ------------------------------------------------------------------------------
    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Queue ``entries`` as the next rows; the future completes once they are committed."""
        if self._closed:
            raise ValueError("the audit sink is closed")
        done: Future[list[AuditRow]] = Future()
        with self._lock:
            self._queued.append((tuple(entries), done))
            first = len(self._queued) == 1
        if first:  # appends queued before the job runs are written with it
            self._executor.submit(self._drain)
        return asyncio.wrap_future(done)

    def rows(self) -> list[AuditRow]:
        """Return every row of the chain in order.

        Raises:
            ValueError: a row does not parse (it was tampered with; `verify` locates it).
        """
        rows, _, _ = self._call(self._read)
        for i, row in enumerate(rows):
            if row is None:
                raise ValueError(f"audit row {i} of chain {self._chain!r} is malformed")
        return [row for row in rows if row is not None]

    def head(self) -> AuditHead:
        """Return the head as this sink last wrote or read it (keep a copy to anchor the chain)."""
        return self._call(self._current_head)

    def _current_head(self) -> AuditHead:
        """The head as last written or read, read again if a store's transaction wrote rows."""
        if self._stale:
            self._stale = False  # before reading: a later joint write sets it again
            conn = self._connect()
            with conn.transaction():
                self._head = self._stored_head(conn, lock=False)
        return self._head

    def verify(self, *, head: AuditHead | None = None) -> AuditVerification:
        """Check the chain: the report is truthy when it holds, else names the first bad row.

        With a key, every row must be the key's and the chain's head row sealed by it.

        Args:
            head: A head saved earlier (`head`, an anchor); by default the one stored with the
                rows (with a key, both are checked).
        """
        rows, stored, seal_text = self._call(self._read)
        return verify_log(rows, stored, key=self._key, seal=seal_text, given=head)

    def close(self) -> None:
        """Finish queued appends and close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True

        def last() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        self._executor.submit(last).result()
        self._executor.shutdown(wait=True)


PostgresAuditSink.__module__ = "middleware.audit"
