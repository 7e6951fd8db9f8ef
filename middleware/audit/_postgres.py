"""`PostgresAuditSink`: an audit chain in PostgreSQL that many processes append to at once.

The chain stays linear across processes because appends are serialised **in the database**, per
chain: an append locks its chain's head row (``SELECT ... FOR UPDATE`` on
``loopware.audit_chains``), chains its rows after the head it finds there, inserts them and moves
the head, in one transaction. A second process appending to the same chain waits on that row
lock, then sees the new head; chains with different names never wait on each other. Nothing in
the process has to coordinate, so any number of workers (and `AuditLog`s) can share a chain.

An async connection belongs to the event loop that opened it. Appends are written on the
appending loop's own ``psycopg.AsyncConnection`` (one per loop, opened by its first append,
re-opened if it breaks; ``middleware/audit/_pg_appenders.py``), with no thread between the
caller and the server: appends from one loop are chained in the order ``append`` was called, and
the appends made while a transaction is in flight are written together in the next one (group
commit), each still getting its own rows. Synchronous callers (opening the sink, ``rows``,
``head``, ``verify``, the CLI) use one more connection, on an event loop of the sink's own in a
thread of its own (``middleware/audit/_sink_loop.py``). The head the sink last wrote or read is
shared by all of them.

One append is one round trip when nobody else wrote to the chain since this sink did: the rows
are chained after the head the sink last wrote or read, and one transaction, its ``BEGIN`` to
its ``COMMIT`` sent together (pipeline mode), moves the head row from that head (``MOVE_FROM``,
which locks the row and fails if it holds another head) and inserts the rows. If another writer
moved the head meanwhile (a process, a store's transaction), the transaction rolls back with
nothing written, and the rows are chained again after the head read under the row lock (a
second round trip), with the same statements.
Durability is the server's: an append completes once its transaction committed, as the
connection's ``synchronous_commit`` says (``on`` by default; ``options=-c
synchronous_commit=off`` in the connection string trades a server crash's last commits for
speed, never a killed client's). Free text is stored as ``bytea`` (UTF-8 with
``surrogatepass``: PostgreSQL ``text`` holds no NUL and no lone surrogate); read one in SQL with
``convert_from(column, 'UTF8')``. The tables live in the ``loopware`` schema beside
`pipeline.stores.PostgresStore`'s, with their own ``audit_migrations``. psycopg is imported when
a sink is created, never by ``import middleware`` (extra ``loopware[postgres]``).

Rows can also be written inside a `PostgresStore`'s transaction on the same database
(`PostgresAuditSink.joint`): the store runs the writer in the transaction that stores a call,
so the call and its row commit together; the writer locks the chain's head row and chains its
rows after it as an append does when the head moved (lock, read, chain, move), on the store's
connection.

With a key (``middleware/audit/_key.py``) the rows are keyed and the head row in
``loopware.audit_chains`` carries its seal (column ``seal``, audit schema 3).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline.errors import InvalidMiddlewareConfigError, MissingExtraError
from pipeline.stores import TransactionWriter

from ._anchor import AuditAnchor, check_anchor
from ._chain import AuditEntry, AuditHead, AuditRow
from ._joint import JointRows
from ._key import AuditKey, check_chain_key, check_key
from ._pg_appenders import Appenders, settle
from ._pg_writes import KnownHead, put, stored_head
from ._postgres_schema import (
    HEAD,
    SELECT,
    migrate,
    write_in,
)
from ._report import AuditVerification
from ._sink_loop import SinkLoop
from ._sqlite_schema import row_from_values
from ._verify import verify_log

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresAuditSink"]

R = TypeVar("R")

def _database_of(info: Any) -> str:
    """How `PostgresStore` names the database a connection reaches (``connection.info``)."""
    return f"postgresql:host={info.host} port={info.port} dbname={info.dbname} user={info.user}"


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
        "_appenders",
        "_chain",
        "_closed",
        "_conn",
        "_conninfo",
        "_database",
        "_key",
        "_known",
        "_loop",
        "_moved",
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
            from psycopg import errors  # a missing extra is reported here, by name
        except ImportError as exc:
            raise MissingExtraError(
                extra="postgres", package="psycopg", needed_by="PostgresAuditSink"
            ) from exc
        self._moved = (errors.NotNullViolation, errors.UniqueViolation)  # see `_write`
        self._key = check_key("PostgresAuditSink", key)
        self._anchor = check_anchor("PostgresAuditSink", anchor)
        self._conninfo = conninfo
        self._chain = chain
        self._timeout = float(timeout)
        self._conn: AsyncConnection[tuple[Any, ...]] | None = None
        self._known = KnownHead()  # shared by the appends of every loop and the reads
        self._database: str | None = None
        self._closed = False
        self._loop = SinkLoop("loopware-audit")
        self._appenders = Appenders(self._open_for_appends, self._write)
        try:
            self._loop.run(self._open())
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        """Show the chain and the number of rows appended so far."""
        return f"PostgresAuditSink(chain={self._chain!r}, rows={self._known.head.count})"

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
        self._known.mark_stale()
        if written and self._anchor is not None:
            self._anchor(written[-1])

    # -- connections ----------------------------------------------------------------------------
    async def _open_for_appends(self) -> AsyncConnection[tuple[Any, ...]]:
        """A new connection on the running loop (an appending loop's, or the sink's own)."""
        from psycopg import AsyncConnection

        return await AsyncConnection.connect(
            self._conninfo, autocommit=True, connect_timeout=max(1, math.ceil(self._timeout))
        )

    async def _connect(self) -> AsyncConnection[tuple[Any, ...]]:
        """The sink's own loop's connection (for synchronous callers), re-opened if broken."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            await conn.close()
        self._conn = await self._open_for_appends()
        return self._conn

    async def _open(self) -> None:
        import psycopg

        try:
            conn = await self._connect()
            async with conn.transaction():
                await migrate(conn)
                stored, head = await stored_head(conn, self._chain, self._key, lock=False)
                check_chain_key("PostgresAuditSink", self._key, head)
            self._known.advance(stored, head, read=True)
            self._database = _database_of(conn.info)
        except psycopg.Error as exc:
            raise InvalidMiddlewareConfigError(f"PostgresAuditSink: cannot open: {exc}") from exc

    async def _write(
        self, conn: AsyncConnection[tuple[Any, ...]], entries: Sequence[AuditEntry]
    ) -> list[AuditRow]:
        """Chain ``entries`` after the head this sink knows, or after the locked one.

        After the known head in one round trip; if another writer (a process, a store's
        transaction, this sink's appends from another loop) moved it meanwhile, after the head
        read under the row lock (see the module docstring).
        """
        known, done = self._known.current(), None
        if known is not None:
            try:  # noqa: SIM105 (no suppress context to build on every append)
                done = await put(conn, self._chain, self._key, entries, known)
            except self._moved:  # the head moved: MOVE_FROM refused it (or a row took the index)
                pass
        if done is None:
            done = await put(conn, self._chain, self._key, entries, None)
        rows, stored = done
        head = AuditHead(stored[0], stored[1])
        self._known.advance(stored, head)  # unless an append on another loop wrote a later one
        if self._anchor is not None:
            self._anchor(head)
        return rows

    async def _read(self) -> tuple[list[AuditRow | None], AuditHead | None, str | None]:
        """Every row, the stored head and its seal."""
        conn = await self._connect()
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            values = await (await conn.execute(SELECT, (self._chain,))).fetchall()
            head = await (await conn.execute(HEAD, (self._chain,))).fetchone()
        stored = None if head is None else AuditHead(int(head[0]), str(head[1]))
        sealed_by = None if head is None or not isinstance(head[2], str) else head[2]
        return [row_from_values(v) for v in values], stored, sealed_by

    async def _current_head(self) -> AuditHead:
        """The head as last written or read, read again if a store's transaction wrote rows."""
        if not self._known.take_stale():  # a later joint write marks it again
            return self._known.head
        try:
            conn = await self._connect()
            async with conn.transaction():
                stored, head = await stored_head(conn, self._chain, self._key, lock=False)
        except BaseException:
            self._known.mark_stale()  # still to read (a retry reads it)
            raise
        self._known.advance(stored, head, read=True)
        return self._known.head

    async def _disconnect(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def _call(self, job: Callable[[], Coroutine[Any, Any, R]]) -> R:
        """Run a read on the sink's own loop; once more on a new connection if it broke.

        That connection idles between synchronous calls, so a server restart or an idle
        timeout is first seen here; a read can simply be made again.
        """
        import psycopg

        if self._closed:
            raise ValueError("the audit sink is closed")
        waiting = self._appenders.take_waiting()
        if waiting is not None:  # this loop's appends, which cannot run before the read returns
            self._write_for(*waiting)
        try:
            return self._loop.run(job())
        except psycopg.OperationalError:
            conn = self._conn
            if conn is None or not conn.closed:
                raise
            return self._loop.run(job())

    def _write_for(self, loop: asyncio.AbstractEventLoop, group: list[Any]) -> None:
        """Write a loop's queued appends on the sink's own loop; settle them on theirs."""
        entries = [entry for appended, _ in group for entry in appended]

        async def write() -> list[AuditRow]:
            return await self._write(await self._connect(), entries)

        outcome: list[AuditRow] | BaseException
        try:
            outcome = self._loop.run(write())
        except Exception as exc:  # every append of the group gets it
            outcome = exc
        loop.call_soon_threadsafe(settle, group, outcome)

    # -- AuditSink ------------------------------------------------------------------------------
    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Queue ``entries`` as the next rows; the future completes once they are committed.

        Raises:
            ValueError: the sink is closed.
        """
        if self._closed:
            raise ValueError("the audit sink is closed")
        return self._appenders.append(entries)

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
        """Finish queued appends and close the connections (idempotent).

        Appends still queued on the calling thread's own running loop cannot be waited for
        here: await them before closing.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._appenders.close()
        finally:
            self._loop.stop(self._disconnect)



PostgresAuditSink.__module__ = "middleware.audit"
