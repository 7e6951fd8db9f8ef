"""`Appenders`: a `PostgresAuditSink`'s appends, written on the appending event loop itself.

An async connection belongs to the loop that opened it, and an append is awaited on the loop
that made it. So the sink keeps one connection per event loop that appends (opened by that
loop's first append, opened again once it broke) and writes there: no thread stands between
the caller and the server.

- **Group commit, per loop.** An append queues its entries and returns a future of its loop.
  One drain task per loop writes the queue: the appends made until it starts (concurrent turns)
  together, then all those queued while a write was in flight together in the next one, each
  getting its own rows. A failed write fails every append of its group; the next append opens
  a new connection if the failure broke this one.
- **Order.** Appends from one loop are chained in the order ``append`` was called. Appends from
  different loops (threads) and processes are ordered by the database: each write moves the
  chain's head row (``middleware/audit/_postgres.py``).
- **Loops that end.** A loop closed with its connection open (``asyncio.run`` per call) leaves
  it to the sink: the next loop's first append, `close`, and the sink's collection close such
  connections' sockets (libpq's ``finish`` needs no loop).
- **Synchronous reads on a loop.** A synchronous read made on a loop whose appends wait for
  that loop to get control back (a listener of ``ToolCallStored`` reading ``rows()``) cannot
  let them run: `take_waiting` hands them to the sink, which writes them on its own connection
  before reading, so the read sees them (their futures are settled on their loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._chain import AuditEntry, AuditRow

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["Appenders", "Waiting", "settle"]

Write = Callable[
    ["AsyncConnection[tuple[Any, ...]]", Sequence[AuditEntry]], Awaitable[list[AuditRow]]
]
"""Write entries as the next rows, in one transaction on the connection, and return them."""
Connect = Callable[[], Awaitable["AsyncConnection[tuple[Any, ...]]"]]
"""Open a connection on the running loop."""

_Queued = tuple[tuple[AuditEntry, ...], "asyncio.Future[list[AuditRow]]"]
Waiting = tuple[asyncio.AbstractEventLoop, list[_Queued]]
"""A loop's queued appends, taken to be written elsewhere (`Appenders.take_waiting`)."""

_CLOSE_WAIT = 30.0
"""Seconds `Appenders.close` waits for another thread's loop to finish its writes."""


class _Appender:
    """One loop's connection, queue and drain task."""

    __slots__ = ("conn", "drain", "loop", "queued", "writing")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.conn: AsyncConnection[tuple[Any, ...]] | None = None
        self.queued: list[_Queued] = []
        self.drain: asyncio.Task[None] | None = None  # running while the queue is written
        self.writing = False  # a group is being written (connecting included)

    def finish(self) -> None:
        """Close the connection's socket without the loop (it is closed, or stopped)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.pgconn.finish()


class Appenders:
    """The appends of one sink: a connection and a group-commit queue per appending loop."""

    __slots__ = ("__weakref__", "_by_loop", "_closed", "_connect", "_lock", "_write")

    def __init__(self, connect: Connect, write: Write) -> None:
        """Keep how to open a connection and how to write a group (both run on the loop)."""
        self._connect = connect
        self._write = write
        self._by_loop: dict[asyncio.AbstractEventLoop, _Appender] = {}
        self._lock = threading.Lock()  # guards _by_loop (appends from loops in any thread)
        self._closed = False
        # a sink collected without `close`: its connections' sockets closed, with no warning
        weakref.finalize(self, _finish_all, self._by_loop)

    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Queue ``entries``; the future (of the running loop) completes once written."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[AuditRow]] = loop.create_future()
        if not entries:
            done.set_result([])
            return done
        appender = self._by_loop.get(loop)
        if appender is None:
            appender = self._start(loop)
        appender.queued.append((tuple(entries), done))  # a copy: the caller may reuse its list
        if appender.drain is None:  # starts once the loop gets control back: the appends its
            # other tasks make until then (concurrent turns) are written with this one
            appender.drain = loop.create_task(self._drain(appender))
        return done

    def _start(self, loop: asyncio.AbstractEventLoop) -> _Appender:
        """This loop's appender; connections of loops closed since are closed here."""
        with self._lock:
            if self._closed:
                raise ValueError("the audit sink is closed")
            for ended in [other for other in self._by_loop if other.is_closed()]:
                self._by_loop.pop(ended).finish()
            appender = self._by_loop[loop] = _Appender(loop)
            return appender

    async def _drain(self, appender: _Appender) -> None:
        """Write the queued appends, a group per transaction, until none is left."""
        group: list[_Queued] = []
        try:
            while appender.queued:
                group, appender.queued = appender.queued, []
                entries = [entry for appended, _ in group for entry in appended]
                appender.writing = True
                try:
                    conn = appender.conn
                    if conn is None or conn.closed:
                        appender.conn = None
                        conn = appender.conn = await self._connect()
                    outcome: list[AuditRow] | BaseException = await self._write(conn, entries)
                except Exception as exc:  # every append of the group gets it
                    outcome = exc
                finally:
                    appender.writing = False
                settle(group, outcome)
                group = []
        except BaseException:  # cancelled (the loop is ending): the transaction may be open
            appender.finish()
            for _, done in [*group, *appender.queued]:
                done.cancel()
            appender.queued = []
            raise
        finally:
            appender.drain = None

    def take_waiting(self) -> Waiting | None:
        """The running loop's queued appends, when none of its writes is on its way.

        For a synchronous read made on that loop: the loop cannot write them before the read
        returns. None when there is no running loop, nothing queued, or a group of that loop is
        being written (the queued ones must follow it: they stay).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        appender = self._by_loop.get(loop)
        if appender is None or appender.writing or not appender.queued:
            return None
        group, appender.queued = appender.queued, []
        return loop, group

    def close(self) -> None:
        """Finish every loop's writes where that can be waited for, then close connections.

        A loop running in another thread finishes its writes and closes its connection there;
        the calling thread's own running loop cannot be waited for (its queued appends fail
        once its drain sees the connection gone); other loops are stopped or closed, and their
        connections' sockets are closed as they are.
        """
        with self._lock:
            self._closed = True
            appenders, self._by_loop = list(self._by_loop.values()), {}
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for appender in appenders:
            loop = appender.loop
            if appender.conn is None and appender.drain is None:
                continue  # nothing open, nothing on its way (a drain may be connecting)
            if loop is not here and loop.is_running() and not loop.is_closed():
                with contextlib.suppress(Exception):  # a loop stopping meanwhile
                    asyncio.run_coroutine_threadsafe(_aclose(appender), loop).result(_CLOSE_WAIT)
                    continue
            appender.finish()


async def _aclose(appender: _Appender) -> None:
    """On the appender's loop: let its drain finish, then close its connection."""
    drain = appender.drain
    if drain is not None:
        await asyncio.gather(drain, return_exceptions=True)
    conn, appender.conn = appender.conn, None
    if conn is not None:
        await conn.close()


def _finish_all(by_loop: dict[asyncio.AbstractEventLoop, _Appender]) -> None:
    for appender in by_loop.values():
        appender.finish()


def settle(group: list[_Queued], outcome: list[AuditRow] | BaseException) -> None:
    """Complete a group's futures, each with its own rows (or the group's error).

    Call it on the futures' loop.
    """
    start = 0
    for appended, done in group:
        if isinstance(outcome, BaseException):
            if not done.done():
                done.set_exception(outcome)
            continue
        rows = outcome[start : start + len(appended)]
        start += len(appended)
        if not done.done():  # cancelled by its caller: its rows are written all the same
            done.set_result(rows)
