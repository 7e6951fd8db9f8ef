"""The dispatch loop of a turn, one named step per method (docs/architecture.md, "One turn").

Per iteration: the iteration cap, re-forging artifact query tools when the turn's artifacts
changed, `IterationStart`, the ``dispatch_input`` stage, the executor, the ``dispatch_output``
stage, `IterationEnd`; then `DispatchEnd`. It drives the turn through `TurnState` and the
public `DispatchContext`. See ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Literal

from ._events import DispatchEnd, DispatchStart, IterationEnd, IterationStart
from .errors import ExecutorError, IterationLimitError, LoopError, ModelError, TurnAbortedError

if TYPE_CHECKING:
    from ._dispatch import DispatchContext
    from ._turn import Turn
    from ._turn_state import TurnState

__all__ = ["ITERATION_STEP", "DispatchLoop", "DispatchOutcome", "Executor"]

Executor = Callable[["DispatchContext"], Awaitable[None]]
"""The model seam: ``async (ctx: DispatchContext) -> None``."""

DispatchOutcome = Literal["ack", "nack", "aborted"]

ITERATION_STEP: Final[contextvars.ContextVar[Callable[[], Awaitable[bool]] | None]] = (
    contextvars.ContextVar("loopware_iteration_step", default=None)
)
"""`DispatchLoop.step` of the dispatch whose executor runs in this context (set by `run`)."""


class DispatchLoop:
    """Runs one dispatch of a turn to its end and reports how it ended."""

    __slots__ = (
        "_d",
        "_dropped",
        "_forced",
        "_forged",
        "_forged_into",
        "_forged_version",
        "_has_input",
        "_has_output",
        "_i",
        "_in_iteration",
        "_max_iterations",
        "_state",
        "_stepped_out",
        "_turn",
    )

    def __init__(self, turn: Turn, state: TurnState, d: DispatchContext) -> None:
        """Prepare the dispatch ``d`` of ``turn``."""
        self._turn = turn
        self._state = state
        self._d = d
        self._forced: LoopError | None = None
        """An error that fails the dispatch even though it was acked (a raising stage)."""
        self._forged: list[str] = []
        self._forged_version = 0
        self._forged_into: object = None
        """The registry the names in ``_forged`` were registered into."""
        self._dropped: set[str] = set()
        """Forged names a middleware unregistered: never forged again in this dispatch."""
        self._has_input = turn.has_stage("dispatch_input")
        self._has_output = turn.has_stage("dispatch_output")
        self._i = 0
        """The current iteration's index (the number of iterations ended so far)."""
        self._in_iteration = False
        self._max_iterations: int | None = None
        self._stepped_out = False
        """The executor stepped through to the dispatch's end (`step` returned False)."""

    def __repr__(self) -> str:
        """Show the dispatch."""
        return f"DispatchLoop({self._d!r})"

    async def run(self, executor: Executor, max_iterations: int | None) -> DispatchOutcome:
        """Iterate until acked, nacked, aborted or capped; emit `DispatchEnd`."""
        state, d = self._state, self._d
        if state.bus.listening:
            state.emit(DispatchStart(turn_id=state.turn_id, dispatch_id=d.dispatch_id))
        self._max_iterations = max_iterations
        token = ITERATION_STEP.set(self.step)
        try:
            if await self._open():
                turn = self._turn
                while True:
                    if not d.is_stopped:  # the executor, inline: no coroutine of its own
                        try:
                            await executor(d)
                        except TurnAbortedError as exc:
                            d.abort(exc.message)
                        except (Exception, asyncio.CancelledError) as exc:
                            if isinstance(exc, asyncio.CancelledError) and turn.really_cancelled():
                                raise
                            self._executor_failed(exc)
                    if self._stepped_out or not await self._next():
                        break
        except asyncio.CancelledError:
            if not self._turn.absorb_cancel():
                state.abort("cancelled by the caller")
                self._end(self._i + int(self._in_iteration), self._in_iteration)
                raise
        except TurnAbortedError as exc:
            state.abort(exc.message)
        finally:
            ITERATION_STEP.reset(token)
        return self._end(self._i + int(self._in_iteration), self._in_iteration)

    async def step(self) -> bool:
        """End the executor's iteration and start the next, from inside the executor.

        For an executor that serves several iterations in one call (a host's loop, which
        closes a batch in the host's own task: ``pipeline/hosted/_turn.py``): the
        ``dispatch_output`` stage and `IterationEnd` of this iteration, then the next one's
        start (`_open`), exactly as when the executor returns. True when the executor goes on
        serving the new iteration; False when the dispatch ended (acked, nacked, aborted or
        capped): the executor then returns at once, and `run` ends the dispatch.
        """
        try:
            going = await self._next()
            if going and self._stopped():  # stopped by its input stage: the iteration ends
                going = await self._next()
        except BaseException:
            # the caller was cancelled (or failed) halfway through the change: the dispatch ends
            # here rather than run the interrupted iteration's dispatch_output a second time
            self._stepped_out = True
            d = self._d
            if not d.is_stopped:
                d.nack(
                    ExecutorError("the iteration change was interrupted: its caller was cancelled")
                )
            raise
        if not going:
            self._stepped_out = True
        return going

    async def _open(self) -> bool:
        """Start an iteration: the cap, re-forging, `IterationStart`, the ``dispatch_input`` stage.

        False when the dispatch ends before the iteration starts (the cap, a broken forge).
        """
        if not self._begin():
            return False
        if self._has_input and not await self._turn.run_stage("dispatch_input", self._d):
            self._fail_with_last()
        return True

    def _begin(self) -> bool:
        """`_open` up to its input stage: the cap, re-forging, `IterationStart`."""
        state, d = self._state, self._d
        i, cap = self._i, self._max_iterations
        if cap is not None and i == cap:
            d.nack(
                IterationLimitError(
                    f"the dispatch reached max_iterations={cap}", max_iterations=cap
                )
            )
            return False
        d.iteration = i
        state.begin_iteration()
        if state.artifact_version != self._forged_version and not self._forge():
            return False
        self._in_iteration = True
        bus = state.bus  # each event built only when somebody takes it
        if bus.listening and bus.wants(IterationStart):
            state.emit(
                IterationStart(turn_id=state.turn_id, dispatch_id=d.dispatch_id, iteration=i)
            )
        return True

    async def _next(self) -> bool:
        """End the iteration (``dispatch_output``, `IterationEnd`) and start the next.

        False when the dispatch ends here (acked, nacked, aborted, a stage's forced error, or
        the next iteration cannot start).
        """
        state, d, turn = self._state, self._d, self._turn
        if (
            self._has_output
            and not self._stopped()  # read again: the executor may have stopped it
            and not await turn.run_stage("dispatch_output", d)
        ):
            self._fail_with_last()
        bus = state.bus
        if bus.listening and bus.wants(IterationEnd):
            state.emit(
                IterationEnd(
                    turn_id=state.turn_id, dispatch_id=d.dispatch_id, iteration=d.iteration
                )
            )
        self._in_iteration = False
        self._i += 1
        if d.is_stopped or self._forced is not None or not self._begin():
            return False
        # the next iteration's input stage, here rather than in `_open`: one coroutine less
        if self._has_input and not await turn.run_stage("dispatch_input", d):
            self._fail_with_last()
        return True

    def _stopped(self) -> bool:
        """Acked, nacked or aborted (read fresh: awaits change it)."""
        return self._d.is_stopped

    def _executor_failed(self, exc: BaseException) -> None:
        """The executor raised: an `ExecutorError` that nacks the dispatch (or is forced).

        A `ModelError` (the provider failed the model call) fails the dispatch as it is.
        """
        d = self._d
        if isinstance(exc, ModelError):
            error: LoopError = exc
        else:
            error = ExecutorError(f"the executor raised {type(exc).__name__}: {exc}")
            error.__cause__ = exc
        self._turn.report(error, "executor")
        if d.is_stopped:
            self._forced = error
        else:
            d.nack(error)

    def _fail_with_last(self) -> None:
        """A stage failed: nack with its error, or force it as the outcome after an ``ack()``.

        A middleware that raises fails the dispatch even after an ``ack()`` (as the executor
        does).
        """
        errors, d = self._state.errors, self._d
        if not errors:
            return
        if not d.is_signalled:
            d.nack(errors[-1])
        elif d.is_acked:
            self._forced = errors[-1]

    def _end(self, iterations: int, in_iteration: bool) -> DispatchOutcome:
        """Settle the outcome, record the nack error and emit `DispatchEnd`."""
        state, d = self._state, self._d
        status: DispatchOutcome
        error: LoopError | None = None
        if state.aborted:
            status = "aborted"
        elif d.is_acked and self._forced is None:
            status = "ack"
        else:
            status = "nack"
            error = self._forced if self._forced is not None else d.nack_error
        state.end_dispatch(iterations, error)
        if state.bus.listening:
            if in_iteration:
                state.emit(
                    IterationEnd(
                        turn_id=state.turn_id, dispatch_id=d.dispatch_id, iteration=d.iteration
                    )
                )
            state.emit(
                DispatchEnd(
                    turn_id=state.turn_id,
                    dispatch_id=d.dispatch_id,
                    status=status,
                    iterations=iterations,
                    error=error,
                )
            )
        return status

    def _forge(self) -> bool:
        """Re-forge artifact query tools when this turn's artifacts changed.

        Names forged again are replaced in place, so a hidden mark a policy put on one (a
        limit reached) survives; names no longer forged are removed; a registry restriction
        (`ToolRegistry.restrict`) may refuse any of them. A forged name that a middleware
        unregistered stays gone for the rest of the dispatch (a later artifact does not bring it
        back). Returns False when forging raised (a broken artifact class): the error is
        reported and the dispatch nacks with it.
        """
        state, d = self._state, self._d
        self._forged_version = state.artifact_version
        tools = d.tools
        dropped = self._dropped
        if tools is self._forged_into:  # the same registry: what is missing was unregistered
            dropped.update(name for name in self._forged if not tools.has(name))
        fresh: dict[str, Any] = {}
        try:
            for cls in dict.fromkeys(state.artifact_ids.values()):
                for forged_tool in cls.forge_tools(d).all():
                    if forged_tool.name not in dropped:
                        fresh[forged_tool.name] = forged_tool
            for name in self._forged:
                if name not in fresh:
                    tools.unregister(name)
            self._forged = [
                name
                for name, forged_tool in fresh.items()
                if tools.register(forged_tool, overwrite=True)
            ]
            self._forged_into = tools
        except Exception as exc:
            error = ExecutorError(
                f"forging artifact query tools raised {type(exc).__name__}: {exc}"
            )
            error.__cause__ = exc
            self._turn.report(error, "executor")
            d.nack(error)
            return False
        return True
