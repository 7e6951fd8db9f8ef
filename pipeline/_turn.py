"""One turn's execution: the four stages, the dispatch loop, abort and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ._context import DispatchContext, TurnContext
from ._errors import (
    DispatchPipelineError,
    ExecutorError,
    InputPipelineError,
    IterationLimitError,
    LoopError,
    NextCalledTwiceError,
    OutputPipelineError,
    PipelineShortCircuitedError,
    StoreError,
    TurnAbortedError,
)
from ._events import (
    DispatchEnd,
    DispatchStart,
    ErrorReported,
    IterationEnd,
    IterationStart,
    StageName,
    TurnStart,
    TurnStatus,
)
from ._ids import new_id
from ._onion import StageRun
from ._result import TurnResult
from ._turn_finish import finish_turn
from .models._seam import Message

if TYPE_CHECKING:
    from ._onion import Onion
    from ._stages import Stage
    from .stores._store import TurnStore

__all__ = ["Turn"]

Executor = Callable[[DispatchContext], Awaitable[None]]

_STAGE_ERRORS: dict[str, type[LoopError]] = {
    "turn_input": InputPipelineError,
    "dispatch_input": DispatchPipelineError,
    "dispatch_output": DispatchPipelineError,
    "turn_output": OutputPipelineError,
}


def _store_failed(what: str, exc: Exception) -> StoreError:
    return StoreError(f"{what} failed: {type(exc).__name__}: {exc}")


def _stopped(d: DispatchContext) -> bool:
    """True once the dispatch is acked, nacked or its turn aborted (read fresh after awaits)."""
    return d._acked or d._nacked or d.turn._aborted


def _is_aborted(ctx: TurnContext) -> bool:
    """Read the abort flag fresh (it changes across awaits)."""
    return ctx._aborted


class Turn:
    """Runs one turn end to end; `TurnRunner` creates one per `run()`."""

    __slots__ = (
        "_cancel_requested",
        "_executor",
        "_finishing",
        "_forged",
        "_forged_version",
        "_max_iterations",
        "_onions",
        "_release_spool",
        "_store",
        "_task",
        "ctx",
        "errors",
        "iterations",
    )

    def __init__(
        self,
        ctx: TurnContext,
        *,
        executor: Executor,
        onions: dict[Stage, Onion],
        store: TurnStore,
        max_iterations: int | None,
        release_spool: bool = False,
    ) -> None:
        """Prepare a turn over a fresh context."""
        self.ctx = ctx
        self.errors: list[LoopError] = []
        self.iterations = 0
        self._executor = executor
        self._onions = onions
        self._store = store
        self._max_iterations = max_iterations
        self._release_spool = release_spool
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._finishing = False
        self._forged: list[str] = []
        self._forged_version = 0
        ctx._abort_hooks.append(self._on_abort)

    def __repr__(self) -> str:
        """Show the turn id."""
        return f"Turn(turn_id={self.ctx.turn_id!r})"

    # -- abort from outside ----------------------------------------------------------------------
    def _on_abort(self, reason: str | None) -> None:
        task = self._task
        if task is None or self._finishing or task.done():
            return
        if asyncio.current_task() is task:
            return  # inside the turn: the loop stops at the next step boundary
        if self.ctx._shield:
            self.ctx._deferred_cancel = self._cancel_now
            return
        self._cancel_now()

    def _cancel_now(self) -> None:
        task = self._task
        if task is not None and not task.done() and not self._finishing:
            self._cancel_requested = True
            task.cancel()

    def _really_cancelled(self) -> bool:
        """True when a CancelledError means this task is being cancelled (by us or the caller).

        A CancelledError raised while nobody cancels the task (user code awaiting a future
        that something else cancelled) is an ordinary failure of whoever raised it.
        """
        task = self._task
        return self._cancel_requested or task is None or task.cancelling() > 0

    def _absorb_cancel(self) -> bool:
        """Return True when a caught CancelledError was our own abort (and absorb it)."""
        if self._cancel_requested:
            self._cancel_requested = False
            task = self._task
            if task is not None:
                task.uncancel()
            return True
        return False

    # -- errors ----------------------------------------------------------------------------------
    def _report(self, error: LoopError, stage: StageName) -> None:
        self.errors.append(error)
        ctx = self.ctx
        if ctx._bus.listening:
            ctx.emit(ErrorReported(turn_id=ctx.turn_id, error=error, stage=stage))

    async def _stage(self, stage: Stage, ctx: Any) -> bool:
        """Run one stage; return False when it failed (the error is reported)."""
        onion = self._onions[stage]
        fns = onion.fns
        if not fns:
            return True
        turn = self.ctx
        try:
            if turn._aborted:
                reached = False
            else:  # Onion.run inlined: one coroutine less per stage and iteration
                run = StageRun(fns, onion.names, ctx, turn)
                await fns[0](ctx, run)
                reached = run.reached_end
        except TurnAbortedError as exc:
            self.ctx.abort(exc.message)
            return True
        except (NextCalledTwiceError, PipelineShortCircuitedError) as exc:
            self._report(exc, stage)
            return False
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and self._really_cancelled():
                raise
            error = _STAGE_ERRORS[stage](
                f"{stage} middleware raised {type(exc).__name__}: {exc}", stage=stage
            )
            error.__cause__ = exc
            self._report(error, stage)
            return False
        if reached or self.ctx._aborted:
            return True
        if isinstance(ctx, DispatchContext) and ctx.is_signalled:
            return True
        self._report(PipelineShortCircuitedError(stage=stage), stage)
        return False

    # -- the turn --------------------------------------------------------------------------------
    async def execute(self, conversation_id: str | None) -> TurnResult:
        """Run the turn and return its result (re-raising a caller's cancellation)."""
        ctx = self.ctx
        self._task = asyncio.current_task()
        started_at = datetime.now(UTC)
        t0 = time.perf_counter()
        first_message = len(ctx._messages)
        status: TurnStatus = "failed"
        cancelled: asyncio.CancelledError | None = None
        try:
            if conversation_id is not None:
                try:
                    messages, calls = await self._store.load_conversation(conversation_id)
                except Exception as exc:
                    if ctx._bus.listening:  # every TurnEnd pairs with a TurnStart
                        ctx.emit(
                            TurnStart(
                                turn_id=ctx.turn_id,
                                input=ctx.input,
                                conversation_id=conversation_id,
                            )
                        )
                    raise _store_failed("loading the conversation", exc) from exc
                ctx._load_history(messages, calls)
                first_message = len(ctx._messages)
            if ctx._bus.listening:
                ctx.emit(
                    TurnStart(turn_id=ctx.turn_id, input=ctx.input, conversation_id=conversation_id)
                )
            try:
                await ctx.store_message(Message(role="user", content=ctx.input))
            except Exception as exc:
                raise _store_failed("saving the user message", exc) from exc
            status = await self._body()
        except asyncio.CancelledError as exc:
            if self._absorb_cancel():
                status = "aborted"
            else:
                ctx._aborted = True
                ctx.abort_reason = ctx.abort_reason or "cancelled by the caller"
                status = "aborted"
                cancelled = exc
        except TurnAbortedError as exc:
            ctx.abort(exc.message)
            status = "aborted"
        except StoreError as exc:
            self._report(exc, "turn_input")
            status = "failed"
        if self._cancel_requested:
            # A cancel deferred past a store write is delivered from inside this task; if no
            # later await consumed it, consume it here so it cannot cancel the finishing steps.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)
            self._absorb_cancel()
        self._finishing = True
        if ctx._aborted:
            status = "aborted"
        return await finish_turn(self, status, started_at, t0, first_message, cancelled)

    async def _body(self) -> TurnStatus:
        ctx = self.ctx
        if not await self._stage("turn_input", ctx):
            return "aborted" if _is_aborted(ctx) else "failed"
        if _is_aborted(ctx):
            return "aborted"
        dispatch = DispatchContext(ctx, new_id("dsp"))
        ctx.tools.bind_context(dispatch)
        outcome = await self._dispatch(dispatch)
        if outcome == "aborted" or _is_aborted(ctx):
            return "aborted"
        if outcome == "nack":
            return "failed"
        if not await self._stage("turn_output", ctx):
            return "aborted" if _is_aborted(ctx) else "failed"
        return "aborted" if _is_aborted(ctx) else "completed"

    async def _dispatch(self, d: DispatchContext) -> str:
        ctx = self.ctx
        bus = ctx._bus
        if bus.listening:
            ctx.emit(DispatchStart(turn_id=ctx.turn_id, dispatch_id=d.dispatch_id))
        forced: LoopError | None = None
        in_iteration = False
        i = 0
        limit = self._max_iterations
        executor = self._executor
        try:
            while True:
                if limit is not None and i == limit:
                    d.nack(
                        IterationLimitError(
                            f"the dispatch reached max_iterations={limit}", max_iterations=limit
                        )
                    )
                    break
                d.iteration = i
                d._new = ()
                if ctx._artifact_version != self._forged_version and not self._forge(d):
                    break
                if bus.listening:
                    ctx.emit(
                        IterationStart(turn_id=ctx.turn_id, dispatch_id=d.dispatch_id, iteration=i)
                    )
                in_iteration = True
                if self._onions["dispatch_input"].fns and not await self._stage(
                    "dispatch_input", d
                ):
                    forced = self._nack_with_last(d) or forced
                if not _stopped(d):
                    try:
                        await executor(d)
                    except TurnAbortedError as exc:
                        ctx.abort(exc.message)
                    except (Exception, asyncio.CancelledError) as exc:
                        if isinstance(exc, asyncio.CancelledError) and self._really_cancelled():
                            raise
                        error = ExecutorError(f"the executor raised {type(exc).__name__}: {exc}")
                        error.__cause__ = exc
                        self._report(error, "executor")
                        if _stopped(d):
                            forced = error
                        else:
                            d.nack(error)
                    if (
                        self._onions["dispatch_output"].fns
                        and not _stopped(d)
                        and not await self._stage("dispatch_output", d)
                    ):
                        forced = self._nack_with_last(d) or forced
                if bus.listening:
                    ctx.emit(
                        IterationEnd(turn_id=ctx.turn_id, dispatch_id=d.dispatch_id, iteration=i)
                    )
                in_iteration = False
                i += 1
                if _stopped(d) or forced is not None:
                    break
        except asyncio.CancelledError:
            if not self._absorb_cancel():
                ctx._aborted = True
                self._end_dispatch(d, i + int(in_iteration), in_iteration, None)
                raise
        except TurnAbortedError as exc:
            ctx.abort(exc.message)
        self.iterations = i + int(in_iteration)
        return self._end_dispatch(d, self.iterations, in_iteration, forced)

    def _end_dispatch(
        self, d: DispatchContext, iterations: int, in_iteration: bool, forced: LoopError | None
    ) -> str:
        ctx = self.ctx
        self.iterations = iterations
        if ctx._aborted:
            status = "aborted"
            error = None
        elif d._acked and forced is None:
            status = "ack"
            error = None
        else:
            status = "nack"
            error = forced if forced is not None else d._nack_error
            if error is not None and all(e is not error for e in self.errors):
                self.errors.append(error)
        if ctx._bus.listening:
            if in_iteration:
                ctx.emit(
                    IterationEnd(
                        turn_id=ctx.turn_id, dispatch_id=d.dispatch_id, iteration=d.iteration
                    )
                )
            ctx.emit(
                DispatchEnd(
                    turn_id=ctx.turn_id,
                    dispatch_id=d.dispatch_id,
                    status=status,  # type: ignore[arg-type]  # narrowed by the branches above
                    iterations=iterations,
                    error=error,
                )
            )
        return status

    def _nack_with_last(self, d: DispatchContext) -> LoopError | None:
        """Nack with the failed stage's error; return it when the dispatch was already acked.

        A middleware that raises fails the dispatch even after an ``ack()`` (as the executor
        does): the returned error is forced as the dispatch's outcome.
        """
        if not self.errors:
            return None
        if not (d._acked or d._nacked):
            d.nack(self.errors[-1])
            return None
        return self.errors[-1] if d._acked else None

    def _forge(self, d: DispatchContext) -> bool:
        """Re-forge artifact query tools when this turn's artifacts changed.

        Names forged again are replaced in place, so a hidden mark a policy put on one (a
        limit reached) survives; names no longer forged are removed; a registry restriction
        (`ToolRegistry.restrict`) may refuse any of them. Returns False when forging raised
        (a broken artifact class): the error is reported and the dispatch nacks with it.
        """
        ctx = self.ctx
        self._forged_version = ctx._artifact_version
        tools = ctx.tools
        fresh: dict[str, Any] = {}
        try:
            for cls in dict.fromkeys(ctx._artifact_ids.values()):
                forged = cls.forge_tools(d)  # type: ignore[attr-defined]  # artifact classes
                for forged_tool in forged.all():
                    fresh[forged_tool.name] = forged_tool
            for name in self._forged:
                if name not in fresh:
                    tools.unregister(name)
            self._forged = [
                name
                for name, forged_tool in fresh.items()
                if tools.register(forged_tool, overwrite=True)
            ]
        except Exception as exc:
            error = ExecutorError(
                f"forging artifact query tools raised {type(exc).__name__}: {exc}"
            )
            error.__cause__ = exc
            self._report(error, "executor")
            d.nack(error)
            return False
        return True
