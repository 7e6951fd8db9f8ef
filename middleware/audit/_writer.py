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
``call_soon_threadsafe`` per event loop and group. On the calling thread, the first append of
a loop turn is written at once; appends other tasks make before the loop gets control back
(concurrent turns) are gathered and written together then, in one ``try_write`` (a task's own
appends in a row are each written at once, so that awaiting each one costs no loop turn). A
synchronous read (``call``) or ``close`` writes a gathered group first.

"Written" means what the sink's durability says: handed to the kernel (or committed with
``synchronous=NORMAL``) for ``"normal"``, which survives a process kill; synced for ``"full"``.
A ``write(2)`` into the page cache or an SQLite commit without ``fsync`` takes microseconds; the
kernel may still make it wait briefly under heavy writeback, as it would any logging write.

The writer thread is a plain thread reading a ``queue.SimpleQueue``: an append's hop to it and
back is cheaper than through a ``ThreadPoolExecutor`` (whose ``submit`` and idle bookkeeping take
Python-level locks; the figures are in docs/benchmarks.md, "Audit chain"). It
ends when the writer is closed or garbage-collected, and at interpreter exit after writing what is
queued (as an executor's worker would).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import ParamSpec, TypeVar

from ._chain import AuditEntry, AuditRow

__all__ = ["ChainWriter", "TryWrite", "Write"]

P = ParamSpec("P")
R = TypeVar("R")

Write = Callable[[Sequence[AuditEntry]], list[AuditRow]]
"""Write entries as the next rows and return them; may wait (runs on the writer thread)."""
TryWrite = Callable[[Sequence[AuditEntry]], "list[AuditRow] | None"]
"""Write entries now if that needs no waiting and return the rows; else return None."""

_Job = Callable[[], object]
_Settled = tuple["asyncio.Future[list[AuditRow]]", object]
_Queued = tuple[Sequence[AuditEntry], "asyncio.Future[list[AuditRow]]", asyncio.AbstractEventLoop]


class ChainWriter:
    """Runs one sink's storage work in append order, without blocking the event loop.

    On the calling thread when that cannot wait, else on one writer thread in submission
    order, with group commit (see the module docstring).
    """

    __slots__ = (
        "__weakref__", "_burst", "_closed", "_io", "_jobs", "_lock", "_pending", "_queue",
        "_stop", "_task", "_try_write", "_write",
    )

    def __init__(self, name: str, write: Write, try_write: TryWrite | None = None) -> None:
        """Start the writer thread; ``try_write`` enables writes on the calling thread."""
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        thread = threading.Thread(target=_serve, args=(self._jobs,), name=name, daemon=True)
        thread.start()
        # Ends the thread once queued jobs are done: on close(), when the writer is collected,
        # or at interpreter exit (weakref.finalize runs then), whichever comes first.
        self._stop = weakref.finalize(self, _stop, self._jobs, thread)
        self._write = write
        self._try_write = try_write
        self._closed = False
        self._lock = threading.Lock()  # guards _queue, _pending and _burst
        self._io = threading.Lock()  # held while storage is used (by either thread)
        self._queue: list[_Queued] = []  # for the writer thread
        self._pending: list[_Queued] = []  # the calling loop's group, written when it yields
        self._burst: asyncio.AbstractEventLoop | None = None  # wrote since it last had control
        self._task: asyncio.Task[object] | None = None  # the task that wrote last in the burst

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
        if self._try_write is None:
            self._enqueue([(tuple(entries), done, loop)])  # a copy: the caller may reuse its list
            return done
        task = asyncio.current_task(loop)
        with self._lock:
            if self._burst is loop and (self._pending or task is not self._task):
                # Another task appends before the loop got control back (concurrent turns):
                # written together when it does (group commit), after the appends before it.
                self._pending.append((tuple(entries), done, loop))
                return done
            free = (
                (self._burst is None or self._burst is loop)
                and not self._queue
                and self._io.acquire(blocking=False)
            )
        if free and self._write_one(entries, done):
            if self._burst is None:
                self._burst = loop
                loop.call_soon(self._end_burst)
            self._task = task
            return done
        self._enqueue([(tuple(entries), done, loop)])
        return done

    def _write_one(
        self, entries: Sequence[AuditEntry], done: asyncio.Future[list[AuditRow]]
    ) -> bool:
        """`_write_now` for one append (the common case), without the group's bookkeeping."""
        try:
            rows = self._try_write(entries)  # type: ignore[misc]
        except Exception as exc:  # the append's awaiter gets it
            done.set_exception(exc)
            return True
        finally:
            self._io.release()
        if rows is None:
            return False
        done.set_result(rows)
        return True

    def _write_now(self, group: list[_Queued]) -> bool:
        """Write ``group`` with ``try_write`` (``_io`` held, released here); False if it waits."""
        try:
            entries = group[0][0] if len(group) == 1 else [e for g in group for e in g[0]]
            outcome: list[AuditRow] | BaseException | None = self._try_write(entries)  # type: ignore[misc]
        except Exception as exc:  # the appends' awaiters get it
            outcome = exc
        finally:
            self._io.release()
        if outcome is None:
            return False
        _settle(_split(group, outcome))
        return True

    def _end_burst(self) -> None:
        """The loop got control back: write the appends gathered meanwhile, as one group."""
        with self._lock:
            group, self._pending, self._burst, self._task = self._pending, [], None, None
            free = bool(group) and not self._queue and self._io.acquire(blocking=False)
        if group and not (free and self._write_now(group)):
            self._enqueue(group)

    def _flush(self) -> None:
        """Write the calling loop's gathered appends now (before a synchronous call)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        with self._lock:
            if not self._pending:
                return
            group, self._pending = self._pending, []
            # Only the group's own loop may settle its futures directly; else the thread does.
            free = running is group[0][2] and not self._queue and self._io.acquire(blocking=False)
        if not (free and self._write_now(group)):
            self._enqueue(group)

    def _enqueue(self, group: list[_Queued]) -> None:
        with self._lock:
            first = not self._queue
            self._queue.extend(group)
        if first:  # later appends join this group until the thread takes the queue
            self._jobs.put(self._drain)

    def _drain(self) -> None:
        with self._io:
            with self._lock:
                group, self._queue = self._queue, []
            if not group:
                return
            entries = group[0][0] if len(group) == 1 else [e for g in group for e in g[0]]
            try:
                outcome: list[AuditRow] | BaseException = self._write(entries)
            except BaseException as exc:  # every append of the group gets it
                outcome = exc
        loops: dict[asyncio.AbstractEventLoop, list[_Settled]] = {}
        for settled in _split(group, outcome):
            loops.setdefault(settled[0].get_loop(), []).append(settled)
        for loop, settle in loops.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits them any more
                loop.call_soon_threadsafe(_settle, settle)

    def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` on the writer thread after the queued appends; return its result.

        Raises:
            ValueError: the writer is closed.
        """
        if self._closed:
            raise ValueError("the audit sink is closed")
        self._flush()
        return self._run(lambda: fn(*args, **kwargs))

    def _run(self, job: Callable[[], R]) -> R:
        """Run ``job`` on the writer thread, holding the storage; wait for its outcome."""
        done: Future[R] = Future()

        def run() -> None:
            try:
                with self._io:
                    result = job()
            except BaseException as exc:  # the caller gets it
                done.set_exception(exc)
            else:
                done.set_result(result)

        self._jobs.put(run)
        return done.result()

    def submit(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the writer thread after the queued appends, without waiting for it.

        Housekeeping (a WAL checkpoint): it holds the storage, so appends made meanwhile wait
        for it on the writer thread (never on the event loop). Its outcome is dropped; nothing
        runs once the writer is closed.
        """
        if not self._closed:
            self._jobs.put(lambda: self._locked(fn))

    def _locked(self, job: Callable[[], R]) -> R:
        with self._io:
            return job()

    def close(self, last: Callable[[], None]) -> None:
        """Finish queued appends, run ``last`` on the writer thread, stop it (idempotent)."""
        if self._closed:
            return
        self._flush()
        self._closed = True
        try:
            self._run(last)
        finally:
            self._stop()


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The writer thread: run jobs in order until told to stop (None)."""
    while (job := jobs.get()) is not None:
        with contextlib.suppress(BaseException):  # jobs report their own outcomes; it goes on
            job()
        del job  # while it waits, it holds no job (which would keep its writer alive)


def _stop(jobs: queue.SimpleQueue[_Job | None], thread: threading.Thread) -> None:
    """Let the writer thread finish the queued jobs and end; wait for it (not from itself)."""
    jobs.put(None)
    if thread is not threading.current_thread():
        thread.join()


def _split(group: list[_Queued], outcome: list[AuditRow] | BaseException) -> list[_Settled]:
    """Pair each append's future with its rows (or the group's exception)."""
    if isinstance(outcome, BaseException):
        return [(done, outcome) for _, done, _ in group]
    settled: list[_Settled] = []
    start = 0
    for entries, done, _ in group:
        settled.append((done, outcome[start : start + len(entries)]))
        start += len(entries)
    return settled


def _settle(settled: list[_Settled]) -> None:
    """Complete appends' futures (their rows are written even if a caller stopped waiting)."""
    for done, result in settled:
        if done.done():  # cancelled by its caller
            continue
        if isinstance(result, BaseException):
            done.set_exception(result)
        else:
            done.set_result(result)  # type: ignore[arg-type]

