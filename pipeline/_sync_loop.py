"""`SyncLoop`: the event loop a runner's ``run_sync`` calls share.

``asyncio.run`` builds and tears down an event loop on every call, which a synchronous caller
running many short turns pays per turn. A runner keeps one loop instead and reuses it, with
``asyncio.run``'s semantics kept per call: it refuses to run inside a running loop, and whatever
tasks a turn leaves behind are cancelled and awaited before the call returns,
so nothing of one turn runs during the next. The loop is closed by `TurnRunner.close`, when
the runner is garbage-collected, or at interpreter exit; an interrupted call (Ctrl-C) closes it
too and the next call starts a fresh one. A second thread calling while the loop is busy gets
a loop of its own for that call, as ``asyncio.run`` would give it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["SyncLoop"]

T = TypeVar("T")


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class SyncLoop:
    """One reusable event loop for synchronous callers (see the module doc)."""

    __slots__ = ("_lock", "_runner")

    def __init__(self) -> None:
        """Start with no loop; the first `run` makes one."""
        self._runner: asyncio.Runner | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        """Say whether a loop is open."""
        return f"SyncLoop(open={self._runner is not None})"

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion on the shared loop and return its result.

        Raises:
            RuntimeError: called from a running event loop (await the coroutine there).
        """
        if _in_running_loop():
            coro.close()
            raise RuntimeError(
                "run_sync() cannot be called from a running event loop; await runner.run()"
            )
        if not self._lock.acquire(blocking=False):
            return asyncio.run(coro)  # another thread holds the shared loop
        try:
            runner = self._runner
            if runner is None:
                runner = self._runner = asyncio.Runner()
            try:
                result = runner.run(coro)
            except Exception:
                self._cancel_leftovers(runner)
                raise
            except BaseException:  # interrupted: the loop may be mid-task, start afresh
                self._runner = None
                runner.close()
                raise
            self._cancel_leftovers(runner)
            return result
        finally:
            self._lock.release()

    @staticmethod
    def _cancel_leftovers(runner: asyncio.Runner) -> None:
        """Cancel and await the tasks a call left behind, as ``asyncio.run`` does on exit."""
        loop = runner.get_loop()
        tasks = asyncio.all_tasks(loop)
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    def close(self) -> None:
        """Close the loop (idempotent); the next `run` opens a new one."""
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is None:
            return
        if _in_running_loop():  # collected inside another loop: its shutdown steps cannot run
            runner.get_loop().close()
        else:
            runner.close()
