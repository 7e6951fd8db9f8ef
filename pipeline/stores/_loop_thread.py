"""`LoopThread`: an event loop on a thread of its own, for a client bound to one loop.

An async connection pool belongs to the event loop that opened it (its connections and
maintenance tasks live there), but a store is used from whatever loop runs the turn:
``run_sync`` starts a new loop per turn, a CLI and a worker have their own. `PostgresStore`
therefore keeps its pool on a private loop in a daemon thread and submits each operation to it,
the way `SqliteStore` keeps its connection on one worker thread. Callers in any loop await the
result; a caller that is cancelled stops waiting, but the operation it started still finishes
(a write that has begun is never cut off halfway).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

R = TypeVar("R")


class LoopThread:
    """A daemon thread running one event loop until `stop`."""

    __slots__ = ("_loop", "_thread")

    def __init__(self, name: str) -> None:
        """Start the thread and its loop."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the thread's loop and await its result from the caller's loop."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return await asyncio.shield(asyncio.wrap_future(future))

    def run_sync(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the thread's loop and block until it is done (not from that loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        """Stop the loop, join the thread and close the loop (blocks)."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
