"""The ``tool_call`` stage: the onion of middleware around one tool execution.

`ToolCallStage` is a runner's composed ``tool_call`` middleware; `run_stage` runs it for one
call (a `ToolCallContext`), with `ToolCallRun` as every layer's ``call_next``; the innermost
``call_next`` runs the handler unless a layer already decided (deny, respond). See
``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._call_records import completed, run_and_record
from ._errors import (
    DispatchPipelineError,
    LoopError,
    NextCalledTwiceError,
    PipelineShortCircuitedError,
    TurnAbortedError,
)
from ._tool_call_ctx import ToolCallContext
from ._toolcall import ToolCall, build_record

__all__ = ["ToolCallRun", "ToolCallStage", "run_stage"]


async def run_stage(
    stage: ToolCallStage, call: ToolCallContext, args: dict[str, Any], inline_limit: int
) -> ToolCall:
    """Run the ``tool_call`` onion around the handler and settle the call's record.

    The record keeps the model's own arguments and checksum; a hook's `deny` or `respond`
    (before or after ``call_next``) decides the outcome; a hook that raises makes the call an
    error call (reported, the turn goes on).
    """
    ctx, tool = call.dispatch, call.tool
    run = ToolCallRun(stage, call, args, inline_limit)
    try:
        await stage.fns[0](call, run)
    except TurnAbortedError:
        raise
    except (NextCalledTwiceError, Exception) as exc:
        error = exc if isinstance(exc, LoopError) else _hook_failed(stage, run.pos, exc)
        ctx.report_error(error, "tool_call")
        return build_record(call.call_id, tool.name, args, call.checksum, f"Error: {error}", True)
    if call.denied is not None:
        return build_record(
            call.call_id, tool.name, args, call.checksum, f"Error: {call.denied}", True
        )
    response = call.response
    if response is not None:
        return completed(ctx, tool, call.call_id, args, call.checksum, response, inline_limit)
    if run.record is None:
        error = PipelineShortCircuitedError(
            f"tool_call middleware {stage.names[run.pos]!r} returned without call_next(), "
            "deny() or respond()",
            stage="tool_call",
        )
        ctx.report_error(error, "tool_call")
        return build_record(call.call_id, tool.name, args, call.checksum, f"Error: {error}", True)
    return run.record


def _hook_failed(stage: ToolCallStage, pos: int, exc: BaseException) -> LoopError:
    error = DispatchPipelineError(
        f"tool_call middleware {stage.names[pos]!r} raised {type(exc).__name__}: {exc}",
        stage="tool_call",
    )
    error.__cause__ = exc
    return error


class ToolCallStage:
    """The composed ``tool_call`` middleware of a runner (outermost first)."""

    __slots__ = ("fns", "names")

    def __init__(
        self, fns: Sequence[Callable[[Any, Any], Awaitable[None]]], names: Sequence[str]
    ) -> None:
        """Hold the stage's functions and names."""
        self.fns = tuple(fns)
        self.names = tuple(names)

    def __repr__(self) -> str:
        """List the middleware names."""
        return f"ToolCallStage({list(self.names)!r})"


class ToolCallRun:
    """One run of the ``tool_call`` stage for one call, and the ``call_next`` of every layer."""

    __slots__ = ("args", "call", "called", "inline_limit", "last", "pos", "record", "stage")

    def __init__(
        self,
        stage: ToolCallStage,
        call: ToolCallContext,
        args: dict[str, Any],
        inline_limit: int,
    ) -> None:
        self.stage = stage
        self.call = call
        self.args = args
        self.inline_limit = inline_limit
        self.last = len(stage.fns) - 1
        self.pos = 0
        self.called = 0
        self.record: ToolCall | None = None

    def __repr__(self) -> str:
        return f"call_next(layer={self.pos}, of={len(self.stage.fns)})"

    async def __call__(self) -> ToolCall:
        i = self.pos
        bit = 1 << i
        if self.called & bit:
            name = self.stage.names[i]
            raise NextCalledTwiceError(
                f"middleware {name!r} awaited call_next() twice", middleware=name
            )
        self.called |= bit
        call = self.call
        if i == self.last or call.denied is not None or call.response is not None:
            self.record = await self._innermost()
            return self.record
        j = i + 1
        self.pos = j
        try:
            await self.stage.fns[j](call, self)
        finally:
            self.pos = i
        if self.record is None:  # an inner layer decided without call_next (deny, respond)
            self.record = await self._settled()
        return self.record

    async def _settled(self) -> ToolCall:
        """The record of a call an inner layer decided (or short-circuited)."""
        call = self.call
        ctx, tool, args = call.dispatch, call.tool, self.args
        if call.denied is not None:
            return build_record(
                call.call_id, tool.name, args, call.checksum, f"Error: {call.denied}", True
            )
        if call.response is not None:
            return completed(
                ctx, tool, call.call_id, args, call.checksum, call.response, self.inline_limit
            )
        return build_record(
            call.call_id,
            tool.name,
            args,
            call.checksum,
            "Error: E_PIPELINE_SHORT_CIRCUITED: a tool_call middleware returned without "
            "call_next(), deny() or respond()",
            True,
        )

    async def _innermost(self) -> ToolCall:
        """Run the handler (unless the call was already decided) and build its record."""
        call = self.call
        if call.denied is not None or call.response is not None:
            return await self._settled()
        call.ran = True
        return await run_and_record(
            call.dispatch,
            call.tool,
            call.call_id,
            self.args,
            call.checksum,
            call.args,
            self.inline_limit,
            call.raw_args,
        )
