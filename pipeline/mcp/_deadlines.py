"""Per-call deadlines on one connection, kept by one lazily re-armed timer (issue 16).

``async with asyncio.timeout(t)`` schedules a timer on the event loop for every call and
cancels it when the call ends: a ``TimerHandle``, a heap push, and the heap's clean-up later.
Calls on one connection all share that connection's timeout and nearly all end long before
it, so `Deadlines` keeps one timer for all of them, armed at the earliest deadline when none
is armed. A call that ends just leaves the set; when the timer fires it cancels the calls
whose deadline has passed and re-arms itself at the earliest one left (if any). A new call
re-arms it only when its deadline is earlier than the armed one (a shorter timeout).

Inside the block, an expired call sees what ``asyncio.timeout`` gives: its task is cancelled,
and the block turns that cancellation into `TimeoutError`, unless the task was also cancelled
from elsewhere (then the `asyncio.CancelledError` goes on, as with ``asyncio.timeout``).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Final

__all__ = ["Deadline", "Deadlines"]

_NEVER: Final = float("inf")


class Deadline:
    """One call's deadline: an async context manager from `Deadlines.after`."""

    __slots__ = ("_cancelling", "_owner", "_task", "expired", "when")

    def __init__(self, owner: Deadlines, when: float) -> None:
        """Bound the current task to ``when`` (loop time) while the block runs."""
        self._owner = owner
        self.when = when
        self.expired = False
        """True once the deadline passed while the block ran (its task was cancelled)."""
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    async def __aenter__(self) -> Deadline:
        """Start counting: the task running the block is the one cancelled at the deadline.

        Raises:
            RuntimeError: not inside a task.
        """
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._owner.add(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop counting; an expiry's cancellation becomes `TimeoutError` (as asyncio's).

        Raises:
            TimeoutError: the deadline passed while the block ran.
        """
        self._owner.discard(self)
        if self.expired:
            assert self._task is not None
            if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc

    def expire(self) -> None:
        """The deadline passed: cancel the block's task (called by `Deadlines`)."""
        self.expired = True
        if self._task is not None:
            self._task.cancel()


class Deadlines:
    """The deadlines of one connection's calls under one timer (see the module docstring)."""

    __slots__ = ("_armed", "_live", "_loop", "_timer")

    def __init__(self) -> None:
        """No call yet, so no timer."""
        self._live: set[Deadline] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._armed = _NEVER
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        """Show how many calls are bounded and when the timer fires (loop time)."""
        return f"Deadlines(live={len(self._live)}, armed={self._armed})"

    @property
    def live(self) -> int:
        """How many blocks are running under a deadline."""
        return len(self._live)

    def after(self, seconds: float | None) -> Deadline:
        """A deadline ``seconds`` from now for an ``async with`` block (None: never)."""
        if seconds is None:
            return Deadline(self, _NEVER)
        return Deadline(self, asyncio.get_running_loop().time() + seconds)

    def add(self, deadline: Deadline) -> None:
        """Count ``deadline`` in; arm the timer when it is the earliest."""
        self._live.add(deadline)
        if deadline.when < self._armed:
            self._arm(deadline.when)
        elif self._loop is not asyncio.get_running_loop() and deadline.when < _NEVER:
            self._arm(deadline.when)  # the timer belongs to an earlier loop (now closed)

    def discard(self, deadline: Deadline) -> None:
        """Count ``deadline`` out (the timer stays armed: it re-arms or stops when it fires)."""
        self._live.discard(deadline)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed = when
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._armed = _NEVER
        now = asyncio.get_running_loop().time()
        earliest = _NEVER
        for deadline in list(self._live):
            if deadline.when <= now:
                self._live.discard(deadline)
                deadline.expire()
            elif deadline.when < earliest:
                earliest = deadline.when
        if earliest < _NEVER:
            self._arm(earliest)
