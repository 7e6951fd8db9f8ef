"""`SinkLoop`: a sink's own event loop in a thread, for what synchronous code asks of it.

An async database connection belongs to the event loop that opened it, and synchronous code
(opening the sink, ``rows``, ``head``, ``verify``, the CLI) has no loop, or has one it must not
block. `PostgresAuditSink` therefore keeps one connection on a loop in a daemon thread of its
own for those calls: `run` hands a coroutine to that loop and blocks until it is done, one at a
time. Appends never come here: they are written on the appending loop's own connection
(``middleware/audit/_pg_appenders.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["SinkLoop"]

R = TypeVar("R")


class SinkLoop:
    """A daemon thread running one event loop until `stop`, running one coroutine at a time."""

    __slots__ = ("_busy", "_loop", "_thread")

    def __init__(self, name: str) -> None:
        """Start the thread and its loop."""
        self._loop = asyncio.new_event_loop()
        self._busy = threading.Lock()  # one job at a time, whichever thread asks
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, job: Coroutine[Any, Any, R]) -> R:
        """Run ``job`` on the loop, alone; block until it is done. Never call it from the loop."""
        with self._busy:
            return asyncio.run_coroutine_threadsafe(job, self._loop).result()

    def stop(self, last: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``last()``, stop the loop and join the thread."""
        try:
            self.run(last())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
