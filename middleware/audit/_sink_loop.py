"""`SinkLoop`: a sink's own event loop, where its async connection lives, with group commit.

An async database connection belongs to the event loop that opened it, but a sink is appended to
from whatever loop runs the turn (``run_sync`` starts one per turn) and read from synchronous
code (``rows``, ``verify``, the CLI). `PostgresAuditSink` therefore keeps its connection on one
loop in a daemon thread of its own, and every use of the connection is a coroutine run there,
one at a time, in the order it was handed over:

- `append` queues entries and returns a future of the caller's loop. Once that loop gets
  control back, one drain task on the sink's loop writes the queued appends with ``write``: the
  appends made meanwhile (concurrent turns) together, and all the appends queued while a write
  was in flight together in the next one (group commit: one transaction), each getting its own
  rows; a failed write fails every append of its group. Futures are settled with one
  ``call_soon_threadsafe`` per caller loop and group.
- `run` runs a coroutine (a read, opening) and blocks until it is done; it runs after the
  appends made before it (it hands over those still waiting for their loop), and `stop` after
  every append.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from ._chain import AuditEntry, AuditRow

__all__ = ["SinkLoop"]

R = TypeVar("R")
Write = Callable[[Sequence[AuditEntry]], Awaitable[list[AuditRow]]]
"""Write entries as the next rows (in one transaction) and return them."""

_Queued = tuple[tuple[AuditEntry, ...], "asyncio.Future[list[AuditRow]]"]
_Settled = tuple["asyncio.Future[list[AuditRow]]", "list[AuditRow] | BaseException"]


class SinkLoop:
    """A daemon thread running one event loop until `stop`, writing appends in groups."""

    __slots__ = (
        "_busy", "_draining", "_drains", "_lock", "_loop", "_queued", "_thread", "_waiting",
        "_write",
    )

    def __init__(self, name: str, write: Write) -> None:
        """Start the thread and its loop; ``write`` writes a group of appends (on the loop)."""
        self._write = write
        self._lock = threading.Lock()  # guards _queued and _draining (appends from any thread)
        self._queued: list[_Queued] = []
        self._draining = False  # a drain is started or running
        self._waiting = False  # appends wait for the caller's loop to hand them over
        self._drains: set[asyncio.Task[None]] = set()  # kept until done
        self._loop = asyncio.new_event_loop()
        self._busy = asyncio.Lock()  # the connection's user (bound to the loop on first wait)
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Queue ``entries``; the future (of the running loop) completes once written."""
        done: asyncio.Future[list[AuditRow]] = asyncio.get_running_loop().create_future()
        if not entries:
            done.set_result([])
            return done
        with self._lock:
            self._queued.append((tuple(entries), done))  # a copy: the caller may reuse its list
            first = not self._draining
            self._draining = self._waiting = True
        if first:  # handed over once the caller's loop gets control back: the appends its
            # other tasks make until then (concurrent turns) are written with this one
            asyncio.get_running_loop().call_soon(self._hand_over)
        return done

    def _hand_over(self) -> None:
        """Start the drain of the appends waiting for it (if not done yet)."""
        with self._lock:
            waiting, self._waiting = self._waiting, False
        if waiting:
            self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        task = self._loop.create_task(self._drain())
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def _drain(self) -> None:
        """Write the queued appends, a group per ``write``, until none is left."""
        while True:
            with self._lock:
                group, self._queued = self._queued, []
                if not group:
                    self._draining = False
                    return
            async with self._busy:
                try:
                    entries = [entry for appended, _ in group for entry in appended]
                    outcome: list[AuditRow] | BaseException = await self._write(entries)
                except Exception as exc:  # every append of the group gets it
                    outcome = exc
            loops: dict[asyncio.AbstractEventLoop, list[_Settled]] = {}
            start = 0
            for appended, done in group:
                part = outcome
                if not isinstance(outcome, BaseException):
                    part = outcome[start : start + len(appended)]
                    start += len(appended)
                loops.setdefault(done.get_loop(), []).append((done, part))
            for loop, settled in loops.items():
                if not loop.is_closed():  # else nobody awaits them any more
                    loop.call_soon_threadsafe(_settle, settled)

    def run(self, job: Coroutine[Any, Any, R]) -> R:
        """Run ``job`` on the loop after the queued appends, alone; block until it is done.

        Never call it from the loop itself.
        """

        async def alone() -> R:
            async with self._busy:
                return await job

        self._hand_over()  # appends made before this call are written before it runs
        return asyncio.run_coroutine_threadsafe(alone(), self._loop).result()

    def stop(self, last: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Finish the queued appends, run ``last()``, stop the loop and join the thread."""

        async def finish() -> None:
            while self._drains:
                await asyncio.gather(*self._drains, return_exceptions=True)
            await last()

        self._hand_over()
        try:
            asyncio.run_coroutine_threadsafe(finish(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


def _settle(settled: list[_Settled]) -> None:
    """Complete appends' futures (their rows are written even if a caller stopped waiting)."""
    for done, outcome in settled:
        if done.done():  # cancelled by its caller
            continue
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)
