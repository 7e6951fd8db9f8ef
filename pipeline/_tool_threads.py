"""`ToolThreads`: the worker threads a runner's sync tool handlers run in.

A sync handler (``def``, not ``async def``) may block: a database driver, ``requests``, a
subprocess, a CPU-heavy parse. Run on the event loop, it would stop every other turn of the
process until it returns. So `Tool.run` runs sync handlers here and awaits the result, while
``async def`` handlers stay on the loop (they never pay the hop).

Rules:

- **Bounded**: at most ``size`` handlers run at once per `ToolThreads` (one per `TurnRunner`,
  option ``tool_threads``); more wait their turn in order. Threads start when first needed and
  stop when the runner is collected.
- **Context kept**: the handler runs in a copy of the caller's context (``contextvars``), as
  ``asyncio.to_thread`` does, so context-local state (a DBOS step, a tracing span) is seen.
- **The context from a thread**: a sync handler may read its context and call ``ctx.abort``
  and ``ctx.emit`` / ``ctx.log`` from its thread: the abort takes effect at the next step
  boundary, as from an async handler, and events are delivered on the turn's loop
  (`tool_thread_loop`). Other changes to the turn (stash writes, gates, tool decisions) belong
  in ``async def`` handlers.
- **Cancellation**: cancelling the awaiting task (a turn's abort, the caller's cancellation, a
  timeout) returns at once; a handler not yet started never starts, and one already running
  keeps running in its thread until it returns (Python cannot stop a thread), its result then
  dropped. Process exit waits for such a thread.

It is not tied to an event loop, so one runner serves ``run_sync`` and any number of loops.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, ParamSpec, TypeVar

__all__ = [
    "DEFAULT_TOOL_THREADS",
    "ToolThreads",
    "shared_tool_threads",
    "threads_of",
    "tool_thread_loop",
]

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_TOOL_THREADS: Final = 40
"""The default bound: as many sync handlers at once as anyio (Starlette, FastAPI) allows."""


class ToolThreads:
    """At most ``size`` sync callables at once in worker threads, awaited from any event loop.

    `TurnRunner` owns one (``tool_threads=``) and every turn's context exposes it
    (``ctx.tool_threads``), so an executor or an async handler can run blocking work under the
    same bound: ``await ctx.tool_threads.run(blocking_fn, arg)``.

    Args:
        size: The most callables running at once (an int >= 1).

    Raises:
        ValueError: ``size`` is not an int >= 1.
    """

    __slots__ = ("_lock", "_pool", "_size")

    def __init__(self, size: int = DEFAULT_TOOL_THREADS) -> None:
        """Check ``size``; no thread starts until the first `run`."""
        given: object = size
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise ValueError(f"tool threads must be an int >= 1, got {size!r}")
        self._size = size
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        """Show the bound."""
        return f"ToolThreads(size={self._size})"

    @property
    def size(self) -> int:
        """The most callables running at once."""
        return self._size

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` in a worker thread, in a copy of the current context.

        Raises:
            BaseException: whatever ``fn`` raised, unchanged.
            asyncio.CancelledError: the awaiting task was cancelled (``fn`` may still be
                running in its thread: see the module docstring).
        """
        pool = self._pool
        if pool is None:
            pool = self._start()
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, _call, loop, fn, args, kwargs)
        return await loop.run_in_executor(pool, call)

    def _start(self) -> ThreadPoolExecutor:
        with self._lock:  # two loops in two threads may start it at once
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._size, thread_name_prefix="loopware-tool")
            return self._pool


_worker = threading.local()


def _call(
    loop: asyncio.AbstractEventLoop,
    fn: Callable[..., T],
    args: tuple[object, ...],
    kwargs: dict[str, object],
) -> T:
    _worker.loop = loop
    try:
        return fn(*args, **kwargs)
    finally:
        _worker.loop = None


def tool_thread_loop() -> asyncio.AbstractEventLoop | None:
    """The loop awaiting the callable this worker thread runs (None on any other thread).

    A sync handler may use its context from its thread; what the context does on the turn's
    loop (emitting events, rejecting gates) is handed to this loop (``call_soon_threadsafe``).
    """
    loop: asyncio.AbstractEventLoop | None = getattr(_worker, "loop", None)
    return loop


_shared: list[ToolThreads] = []


def shared_tool_threads() -> ToolThreads:
    """The process's default `ToolThreads`: for a tool run with a context that has none."""
    if not _shared:
        _shared.append(ToolThreads())
    return _shared[0]


def threads_of(ctx: object) -> ToolThreads:
    """The `ToolThreads` of a context (its runner's), or the process's default for any other."""
    threads = getattr(ctx, "tool_threads", None)
    return threads if isinstance(threads, ToolThreads) else shared_tool_threads()


ToolThreads.__module__ = "pipeline"
