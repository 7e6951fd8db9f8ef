"""`Iterations`: a hosted turn's task, and the dispatch iterations it serves to a host's loop.

A hosted turn is an ordinary loopware turn (its own task, started on the runner) whose
executor is the host. The executor is called once, for the dispatch's first iteration, and
serves every later one too: when the host closes a batch (`Iterations.end_batch`), the
iteration change (``dispatch_output`` and `IterationEnd` of the batch, then the next
iteration's start and its ``dispatch_input``) runs in the host's own task, through the
dispatch loop's `DispatchLoop.step` (``pipeline/_dispatch_loop.py``). A lone call, as the MCP
gateway makes one per batch, therefore costs no hand-off to the turn's task and back. The turn's
task wakes only when the dispatch ends: the host finished the run (`finish`), or a step ended
the dispatch (a policy nacked or aborted it).

While a step runs, the calls that arrive wait for the next iteration (`until_ready`), so no call
is stored in the iteration being closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from .._dispatch_loop import ITERATION_STEP

if TYPE_CHECKING:
    from .._dispatch import DispatchContext
    from .._result import TurnResult
    from .._runner import TurnHandle

__all__ = ["DRIVER", "Iterations"]

DRIVER: Final[contextvars.ContextVar[Callable[[DispatchContext], Awaitable[None]] | None]] = (
    contextvars.ContextVar("loopware_hosted_driver", default=None)
)
"""The iteration server of the hosted turn whose task is being created (read by its executor)."""


class Iterations:
    """A hosted turn's task and the iteration it serves now (see the module docstring)."""

    __slots__ = ("_ended", "_handle", "_result", "_signal", "_step", "dispatch", "open", "ready")

    def __init__(self) -> None:
        """Nothing started yet (`start` starts the turn)."""
        self._handle: TurnHandle | None = None
        self._ended: asyncio.Future[None] | None = None
        self._signal: asyncio.Future[bool] | None = None
        self._step: Callable[[], Awaitable[bool]] | None = None
        self._result: TurnResult | None = None
        self.dispatch: DispatchContext | None = None
        """The turn's dispatch context, once the turn serves its first iteration."""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done while an iteration is served (or once the turn ended); a fresh one during a step."""
        self.open = False
        """Whether a call was stored since the batch was last closed (`end_batch` has work)."""

    def __repr__(self) -> str:
        """Show the turn's id and whether it ended."""
        turn_id = None if self._handle is None else self._handle.turn_id
        return f"Iterations(turn_id={turn_id!r}, ended={self.ended})"

    @property
    def handle(self) -> TurnHandle:
        """The turn's handle (once started)."""
        if self._handle is None:
            raise RuntimeError("the hosted turn has not started")
        return self._handle

    @property
    def started(self) -> bool:
        """Whether the turn was started."""
        return self._handle is not None

    @property
    def ended(self) -> bool:
        """True once the turn's task is done."""
        handle = self._handle
        return handle is not None and handle.done()

    async def start(self, handle_of: Callable[[], TurnHandle]) -> None:
        """Start the turn (``handle_of`` starts it on the runner) and wait for its first step."""
        token = DRIVER.set(self._serve)
        try:
            self._handle = handle_of()
        finally:
            DRIVER.reset(token)
        # one waiter for the turn's end (never cancelled: that would cancel the turn's task)
        self._ended = asyncio.ensure_future(_wait_handle(self._handle))
        self._ended.add_done_callback(self._wake)
        await self.until_ready()

    def _wake(self, ended: asyncio.Future[None]) -> None:
        """The turn ended: whoever waits for its next iteration is let go (it will serve none)."""
        if not self.ready.done():
            self.ready.set_result(None)

    async def _serve(self, ctx: DispatchContext) -> None:
        """The executor: serve iterations until the host finishes the run or a step ends it."""
        step = ITERATION_STEP.get()
        if step is None:  # only `DispatchLoop.run` calls an executor
            raise RuntimeError("a hosted turn's executor runs inside its dispatch loop")
        self.dispatch = ctx
        self._step = step
        signal = self._signal = asyncio.get_running_loop().create_future()
        if not self.ready.done():
            self.ready.set_result(None)
        finish = await signal
        if finish and not ctx.is_signalled:
            ctx.ack()

    async def until_ready(self) -> None:
        """Wait until the turn serves an iteration, or has ended."""
        ended = self._ended
        if ended is None or ended.done():
            return
        ready = self.ready
        if not ready.done():
            await asyncio.shield(ready)  # set when an iteration is served, or by `_wake`

    async def end_batch(self) -> None:
        """Close the batch and start the next iteration, in the caller's task (a no-op if none).

        When the step ends the dispatch, the turn's task is let go and this waits for its end.
        """
        if not self.open or self.ended:
            return
        step = self._step
        if step is None:  # a call was stored, so the turn serves: set by `_serve`
            raise RuntimeError("the hosted turn serves no iteration")
        self.open = False
        ready = self.ready = asyncio.get_running_loop().create_future()
        try:
            going = await step()
        except BaseException:  # the caller was cancelled mid-step: the turn's task goes on
            self._let_go(False)
            raise
        if going:
            if not ready.done():
                ready.set_result(None)
            return
        self._let_go(False)
        await self.until_ready()

    def _let_go(self, finish: bool) -> None:
        """Let the executor return (acking first when ``finish``)."""
        signal = self._signal
        if signal is not None and not signal.done():
            signal.set_result(finish)

    async def finish(self) -> TurnResult:
        """End the run: ``turn_output`` runs in the turn's task; its `TurnResult`."""
        if self._result is not None:
            return self._result
        handle = self.handle
        await self.until_ready()
        self._let_go(True)
        self._result = await handle
        return self._result


async def _wait_handle(handle: TurnHandle) -> None:
    with contextlib.suppress(BaseException):  # its outcome is read by `finish`
        await handle
