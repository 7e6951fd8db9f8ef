"""`Turn`: one turn end to end, over one `TurnState` (docs/architecture.md, "One turn").

The turn loads its conversation, runs ``turn_input``, the dispatch loop
(``pipeline/_dispatch_loop.py``) and ``turn_output``, turns an abort or a cancellation into an
``aborted`` ending, and finishes: `TurnEnd`, the `TurnResult`, the stored turn record, the spool
released and pending listeners awaited. See ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from inspect import isawaitable
from typing import TYPE_CHECKING, Any

from . import _running_ids as running_ids
from ._bus import drain
from ._context import TurnContext
from ._dispatch import DispatchContext
from ._dispatch_loop import DispatchLoop, Executor
from ._events import Log, StageName, TurnEnd, TurnStart, TurnStatus
from ._ids import new_id
from ._onion import StageRun
from ._result import TurnResult
from ._tool_threads import tool_thread_loop
from ._turn_state import uncancellable
from .calls._arguments import UNNAMED
from .calls._run import unrun_record
from .errors import (
    DispatchPipelineError,
    InputPipelineError,
    LoopError,
    NextCalledTwiceError,
    OutputPipelineError,
    PipelineShortCircuitedError,
    PolicyViolationError,
    StoreError,
    TurnAbortedError,
)
from .models._message import new_message
from .stores._store import TurnRecord, read_history

if TYPE_CHECKING:
    from ._onion import Onion
    from ._stages import Stage
    from ._turn_state import TurnState
    from .calls._decision import DecisionAction

__all__ = ["Turn"]

_STAGE_ERRORS: dict[str, type[LoopError]] = {
    "turn_input": InputPipelineError,
    "dispatch_input": DispatchPipelineError,
    "dispatch_output": DispatchPipelineError,
    "turn_output": OutputPipelineError,
}


_UNANSWERED: dict[TurnStatus, tuple[DecisionAction, str]] = {
    "aborted": ("aborted", "the turn was aborted before this call was answered"),
    "failed": ("failed", "the turn failed before this call was answered"),
}
"""What a call announced but never stored reads, by how the turn ended."""


def _store_failed(what: str, exc: Exception) -> StoreError:
    return StoreError(f"{what} failed: {type(exc).__name__}: {exc}")


class Turn:
    """Runs one turn end to end; `TurnRunner` creates one per `run()`."""

    __slots__ = (
        "_cancel_requested",
        "_executor",
        "_finishing",
        "_max_iterations",
        "_onions",
        "_release_spool",
        "_task",
        "ctx",
        "state",
    )

    def __init__(
        self,
        state: TurnState,
        *,
        executor: Executor,
        onions: dict[Stage, Onion],
        max_iterations: int | None,
        release_spool: bool = False,
    ) -> None:
        """Prepare a turn over a fresh state."""
        self.state = state
        self.ctx = TurnContext(state)
        self._executor = executor
        self._onions = onions
        self._max_iterations = max_iterations
        self._release_spool = release_spool
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._finishing = False
        state.on_abort(self._on_abort)

    def __repr__(self) -> str:
        """Show the turn id."""
        return f"Turn(turn_id={self.state.turn_id!r})"

    # -- abort from outside ----------------------------------------------------------------------
    def _on_abort(self, reason: str | None) -> None:
        task = self._task
        if task is None or self._finishing or task.done():
            return
        if tool_thread_loop() is not None:  # a sync handler, in its worker thread: inside
            return
        if asyncio.current_task() is task:
            return  # inside the turn: the loop stops at the next step boundary
        if not self.state.defer_while_shielded(self._cancel_now):
            self._cancel_now()

    def _cancel_now(self) -> None:
        task = self._task
        if task is not None and not task.done() and not self._finishing:
            self._cancel_requested = True
            task.cancel()

    def really_cancelled(self) -> bool:
        """True when a CancelledError means the task is being cancelled (by us or the caller).

        A CancelledError raised while nobody cancels the task (user code awaiting a future
        that something else cancelled) is an ordinary failure of whoever raised it.
        """
        task = self._task
        if self._cancel_requested or task is None or task.cancelling() > 0:
            return True
        # a stage run in a host's task (a hosted batch closed there): that task's cancellation
        current = asyncio.current_task()
        return current is not None and current is not task and current.cancelling() > 0

    def absorb_cancel(self) -> bool:
        """Return True when a caught CancelledError was our own abort (and absorb it)."""
        if self._cancel_requested:
            self._cancel_requested = False
            task = self._task
            if task is not None:
                task.uncancel()
            return True
        return False

    # -- stages ----------------------------------------------------------------------------------
    def report(self, error: LoopError, stage: StageName) -> None:
        """Record an error of the turn and emit `ErrorReported`."""
        self.state.report(error, stage)

    def has_stage(self, stage: Stage) -> bool:
        """True when ``stage`` has any middleware."""
        return bool(self._onions[stage].fns)

    async def run_stage(self, stage: Stage, ctx: TurnContext | DispatchContext) -> bool:
        """Run one stage; return False when it failed (the error is reported)."""
        onion = self._onions[stage]
        fns = onion.fns
        if not fns:
            return True
        state = self.state
        try:
            reached = False
            checks = onion.runs[0]  # the checks before the first real layer, run in line
            if checks:
                for check in checks:
                    if state.aborted:
                        break
                    result = check(ctx)
                    if result is not None and isawaitable(result):
                        await result
            j = onion.after[0]
            if state.aborted:
                pass  # an abort skips every middleware that has not started yet
            elif j > onion.last:
                reached = True
            else:  # the first real layer, entered directly: its call_next runs the rest
                run = StageRun(onion, ctx, state)
                run.pos = j
                await fns[j](ctx, run)
                reached = run.reached_end
        except TurnAbortedError as exc:
            state.abort(exc.message)
            return True
        except (NextCalledTwiceError, PipelineShortCircuitedError, PolicyViolationError) as exc:
            # a policy's verdict fails the stage as it is (turn output cannot nack any more)
            self.report(exc, stage)
            return False
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and self.really_cancelled():
                raise
            error = _STAGE_ERRORS[stage](
                f"{stage} middleware raised {type(exc).__name__}: {exc}", stage=stage
            )
            error.__cause__ = exc
            self.report(error, stage)
            return False
        if reached or state.aborted:
            return True
        if isinstance(ctx, DispatchContext) and ctx.is_signalled:
            return True
        self.report(PipelineShortCircuitedError(stage=stage), stage)
        return False

    # -- the turn --------------------------------------------------------------------------------
    async def execute(self, conversation_id: str | None) -> TurnResult:
        """Run the turn and return its result (re-raising a caller's cancellation)."""
        try:
            return await self._execute(conversation_id)
        finally:
            if conversation_id is not None and isinstance(self.state.running_ids, set):
                running_ids.leave(conversation_id)  # entered in `_start`

    async def _execute(self, conversation_id: str | None) -> TurnResult:
        state = self.state
        self._task = asyncio.current_task()
        started_at = datetime.now(UTC)
        t0 = time.perf_counter()
        first_message = len(state.messages)
        status: TurnStatus = "failed"
        cancelled: asyncio.CancelledError | None = None
        try:
            first_message = await self._start(conversation_id)
            status = await self._body()
        except asyncio.CancelledError as exc:
            status = "aborted"
            if not self.absorb_cancel():
                state.abort("cancelled by the caller")
                cancelled = exc
        except TurnAbortedError as exc:
            state.abort(exc.message)
            status = "aborted"
        except StoreError as exc:
            self.report(exc, "turn_input")
            status = "failed"
        if self._cancel_requested:
            # A cancel deferred past a store write is delivered from inside this task; if no
            # later await consumed it, consume it here so it cannot cancel the finishing steps.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)
            self.absorb_cancel()
        self._finishing = True
        if state.aborted:
            status = "aborted"
        if status != "completed":
            try:
                await self._answer_announced(first_message, status)
            except asyncio.CancelledError as exc:  # the caller's: propagated after finishing
                cancelled = cancelled or exc
        return await self._finish(status, started_at, t0, first_message, cancelled)

    async def _start(self, conversation_id: str | None) -> int:
        """Load the conversation, emit `TurnStart`, store the user message.

        Returns the index of this turn's first message.
        """
        state = self.state
        listening = state.bus.listening
        start = (
            TurnStart(turn_id=state.turn_id, input=state.input, conversation_id=conversation_id)
            if listening
            else None
        )
        if conversation_id is not None:
            state.running_ids = running_ids.enter(conversation_id)  # left in `execute`
            try:
                history = await read_history(state.store, conversation_id)
            except BaseException as exc:  # a store error, or the caller cancelling meanwhile
                if start is not None:  # every TurnEnd pairs with a TurnStart
                    state.emit(start)
                if isinstance(exc, Exception):
                    raise _store_failed("loading the conversation", exc) from exc
                raise
            state.load_history(history)
        first_message = len(state.messages)
        if start is not None:
            state.emit(start)
        try:
            await state.store_message(new_message("user", state.input))
        except Exception as exc:
            raise _store_failed("saving the user message", exc) from exc
        return first_message

    def _aborted(self) -> bool:
        """The abort flag, read fresh (awaits change it)."""
        return self.state.aborted

    async def _body(self) -> TurnStatus:
        state, ctx = self.state, self.ctx
        if not await self.run_stage("turn_input", ctx):
            return "aborted" if self._aborted() else "failed"
        if self._aborted():
            return "aborted"
        dispatch = DispatchContext(state, ctx, new_id("dsp"))
        ctx.tools.bind_context(dispatch)
        loop = DispatchLoop(self, state, dispatch)
        outcome = await loop.run(self._executor, self._max_iterations)
        if outcome == "aborted" or self._aborted():
            return "aborted"
        if outcome == "nack":
            return "failed"
        if not await self.run_stage("turn_output", ctx):
            return "aborted" if self._aborted() else "failed"
        return "aborted" if self._aborted() else "completed"

    async def _answer_announced(self, first_message: int, status: TurnStatus) -> None:
        """Store an error for every call this turn announced that has no record.

        The conversation's next turn must pair every tool-call id of an assistant message with
        a result, or providers refuse it. The standard executor answers its own calls when
        interrupted; this covers any executor, and the calls an executor announced without a
        message (`DispatchContext.announce`: a host's calls in flight when a policy ended the
        turn): a call whose store write failed is stored again as it was built, a call whose
        run was interrupted keeps what it did, and any other is stored not run, under the name
        its executor announced (unnamed when only a message named its id). The writes finish
        even if the caller cancels again (then re-raised); a failing store is logged, as for
        the turn record.
        """
        state = self.state
        by_id, history = state.by_id, state.history_ids
        announced = state.announced
        missing = {
            cid: UNNAMED
            for message in state.messages[first_message:]
            for cid in message.tool_call_ids
            if cid not in by_id and cid not in history
        }
        missing.update(
            (cid, name)
            for cid, name in announced.items()
            if cid not in by_id and cid not in history
        )
        if not missing:
            return
        action, reason = _UNANSWERED.get(status, _UNANSWERED["failed"])

        async def answer() -> None:
            for cid, name in missing.items():
                unstored = state.unstored.pop(cid, None)
                if unstored is not None:  # its record was built, its store write failed
                    await state.store_tool_call(unstored, again=True)
                    continue
                run = state.take_interrupted(cid)  # what a custom executor's run did
                call = (
                    run.abandon(reason, action)
                    if run is not None
                    else unrun_record(
                        cid,
                        name,
                        policy="loopware.turn",
                        action=action,
                        reason=reason,
                        text=f"Error: {reason}.",
                    )
                )
                await state.store_tool_call(call)

        try:
            await uncancellable(answer())
        except Exception as exc:  # the turn already ended; never lose the result over this
            self._log_store_error(f"answering announced tool calls failed: {exc!r}")

    def _log_store_error(self, message: str) -> None:
        state = self.state
        if state.bus.listening:
            state.emit(
                Log(
                    turn_id=state.turn_id,
                    level="error",
                    kind="store_error",
                    message=message,
                    payload={},
                )
            )

    async def _finish(
        self,
        status: TurnStatus,
        started_at: datetime,
        t0: float,
        first_message: int,
        cancelled: asyncio.CancelledError | None,
    ) -> TurnResult:
        """Emit `TurnEnd`, build the result, save the turn record, await listeners."""
        state = self.state
        ended_at = datetime.now(UTC)
        failure = state.errors[0] if status == "failed" and state.errors else None
        if state.bus.listening:
            duration_ms = (time.perf_counter() - t0) * 1000.0
            state.emit(
                TurnEnd(
                    turn_id=state.turn_id, status=status, duration_ms=duration_ms, error=failure
                )
            )
        output = None
        if status == "completed":
            for message in reversed(state.messages[first_message:]):
                if message.role == "assistant" and not message.tool_call_ids:
                    output = message.content
                    break
        result = TurnResult(
            turn_id=state.turn_id,
            conversation_id=state.conversation_id,
            status=status,
            output=output,
            messages=tuple(state.messages[first_message:]),
            tool_calls=tuple(state.calls),
            errors=tuple(state.errors),
            iterations=state.iterations,
            stash=state.stash.finish(),  # no copy: the stash is read-only from now on
            started_at=started_at,
            ended_at=ended_at,
            abort_reason=state.abort_reason if status == "aborted" else None,
            tool_decisions=tuple(state.tool_decisions),
        )
        await self._save_record(result, failure)
        if self._release_spool:
            state.release_spool()
        if cancelled is not None:
            raise cancelled  # after recording the turn as aborted: the caller still sees it
        if state.pending:
            await drain(state.pending)
        return result

    async def _save_record(self, result: TurnResult, failure: LoopError | None) -> None:
        """Save the turn record; a failing store is logged, never loses the result."""
        state = self.state
        if not state.saves:  # the default store keeps no turn outside a conversation
            return
        record = TurnRecord(
            turn_id=result.turn_id,
            conversation_id=result.conversation_id,
            status=result.status,
            input=state.input,
            output=result.output,
            iterations=result.iterations,
            error_code=failure.code if failure else None,
            error_message=failure.message if failure else None,
            started_at=result.started_at,
            ended_at=result.ended_at,
        )
        try:
            await state.store.save_turn(record)
        except Exception as exc:  # the turn already happened; never lose the result over this
            self._log_store_error(f"saving the turn record failed: {exc!r}")
