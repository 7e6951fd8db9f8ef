"""`ChainWriter`: how a built-in sink's appends reach storage without blocking the event loop.

A sink hands it two functions. ``write`` may wait (for a lock another process holds, for
``fsync``): it runs on the sink's one writer thread, never on the event loop. ``try_write``
(given only with ``synchronous="normal"``, where nothing waits for the disk) writes at once if
that needs no waiting, and returns None otherwise: then the event loop's append is done before
``append`` returns, without a thread hop, and only an append that would wait goes to the thread.

Order: appends are written in the order ``append`` was called. A write on the calling thread
happens only when no append is queued for the thread and the thread is not writing (both
checked under one lock, and the thread holds the storage lock from taking its group until its
write is done), so it can never overtake an earlier append.

Group commit: appends queued while the thread is busy are written together by one ``write``
call (one transaction, one ``fsync``), each append still getting its own rows; a failed write
fails every append of its group. The thread settles the awaiting futures with one
``call_soon_threadsafe`` per event loop and group.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from ._chain import AuditEntry, AuditRow

__all__ = ["ChainWriter", "TryWrite", "Write"]

P = ParamSpec("P")
R = TypeVar("R")

Write = Callable[[Sequence[AuditEntry]], list[AuditRow]]
"""Write entries as the next rows and return them; may wait (runs on the writer thread)."""
TryWrite = Callable[[Sequence[AuditEntry]], "list[AuditRow] | None"]
"""Write entries now if that needs no waiting and return the rows; else return None."""

_Queued = tuple[Sequence[AuditEntry], "asyncio.Future[list[AuditRow]]", asyncio.AbstractEventLoop]


class ChainWriter:
    """Runs one sink's storage work: on the calling thread when it cannot wait, else on one
    writer thread in submission order, with group commit (see the module docstring)."""

    __slots__ = ("_closed", "_executor", "_io", "_lock", "_queue", "_try_write", "_write")

    def __init__(self, name: str, write: Write, try_write: TryWrite | None = None) -> None:
        """Start the writer thread; ``try_write`` enables writes on the calling thread."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._write = write
        self._try_write = try_write
        self._closed = False
        self._lock = threading.Lock()  # guards _queue
        self._io = threading.Lock()  # held while storage is used (by either thread)
        self._queue: list[_Queued] = []

    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Write ``entries`` as the next rows; the future completes once they are written.

        Raises:
            ValueError: the writer is closed.
        """
        if self._closed:
            raise ValueError("the audit sink is closed")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[AuditRow]] = loop.create_future()
        if not entries:
            done.set_result([])
            return done
        if self._try_write is not None:
            with self._lock:
                free = not self._queue and self._io.acquire(blocking=False)
            if free:
                try:
                    rows = self._try_write(entries)
                except Exception as exc:  # noqa: BLE001 - the append's awaiter gets it
                    done.set_exception(exc)
                    return done
                finally:
                    self._io.release()
                if rows is not None:
                    done.set_result(rows)
                    return done
        with self._lock:
            self._queue.append((entries, done, loop))
            first = len(self._queue) == 1
        if first:  # later appends join this group until the thread takes the queue
            self._executor.submit(self._drain)
        return done

    def _drain(self) -> None:
        with self._io:
            with self._lock:
                group, self._queue = self._queue, []
            if not group:
                return
            entries = group[0][0] if len(group) == 1 else [e for g in group for e in g[0]]
            try:
                outcome: list[AuditRow] | BaseException = self._write(entries)
            except BaseException as exc:  # noqa: BLE001 - every append of the group gets it
                outcome = exc
        loops: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[list[AuditRow]], object]]]
        loops = {}
        start = 0
        for queued, done, loop in group:
            if isinstance(outcome, BaseException):
                result: object = outcome
            else:
                result = outcome[start : start + len(queued)]
                start += len(queued)
            loops.setdefault(loop, []).append((done, result))
        for loop, settled in loops.items():
            try:
                loop.call_soon_threadsafe(_settle, settled)
            except RuntimeError:  # the loop is closed: nobody awaits these appends any more
                pass

    def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` on the writer thread after the queued appends; return its result.

        Raises:
            ValueError: the writer is closed.
        """
        if self._closed:
            raise ValueError("the audit sink is closed")
        return self._executor.submit(self._locked, fn, *args, **kwargs).result()

    def _locked(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        with self._io:
            return fn(*args, **kwargs)

    def close(self, last: Callable[[], None]) -> None:
        """Finish queued appends, run ``last`` on the writer thread, stop it (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._executor.submit(self._locked, last).result()
        finally:
            self._executor.shutdown(wait=True)


def _settle(settled: list[tuple[asyncio.Future[list[AuditRow]], object]]) -> None:
    """Complete appends' futures (their rows are written even if a caller stopped waiting)."""
    for done, result in settled:
        if done.done():  # cancelled by its caller
            continue
        if isinstance(result, BaseException):
            done.set_exception(result)
        else:
            done.set_result(result)  # type: ignore[arg-type]

