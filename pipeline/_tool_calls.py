"""Running one proposed call into a completed `ToolCall`: the one place records are built.

`DispatchContext.run_tool` (and so every executor, built-in or not) goes through
`run_tool_call`: parse the provider's argument text, find the tool, run it with the provider's
call id (`Tool.run`), and turn the output (or the failure) into a record: text and bytes are
inlined or spooled as an artifact, artifact-tool answers stay text, media pass as they are, and
every failure the model should see becomes an error record. See ``docs/architecture.md``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._errors import (
    DispatchPipelineError,
    LoopError,
    NextCalledTwiceError,
    PipelineShortCircuitedError,
    ToolNotFoundError,
    TurnAbortedError,
)
from ._events import Log
from ._json import tool_call_checksum
from ._tool_call_ctx import ToolCallContext
from ._toolcall import ToolCall, ToolCallResults, build_record
from .artifacts._artifact import SpooledArtifact
from .artifacts._forge import ArtifactTool
from .artifacts._media import Media

if TYPE_CHECKING:
    from ._dispatch import DispatchContext
    from ._tool import Tool

__all__ = [
    "DEFAULT_INLINE_LIMIT",
    "UNNAMED",
    "ToolCallRun",
    "ToolCallStage",
    "completed",
    "error_call",
    "run_stage",
    "run_tool_call",
]

_NAME_ECHO: Final = 64
"""How much of an unknown tool name an error echoes (a 1 MB name must not come back whole)."""

DEFAULT_INLINE_LIMIT: Final = 4096
"""Text results up to this many UTF-8 bytes are shown to the model whole."""

UNNAMED: Final = "(unnamed)"
"""The tool name stored for a proposed call that named no tool."""


async def run_tool_call(
    ctx: DispatchContext,
    call_id: str,
    name: str,
    arguments: object,
    inline_limit: int,
    stage: ToolCallStage | None,
) -> ToolCall:
    """Run one proposed call on ``ctx`` and return its completed record (see the module doc).

    Raises:
        TurnAbortedError: the handler, a guard or a ``tool_call`` hook aborted the turn.
    """
    if type(arguments) is str and arguments[:1] == "{":  # the common case, without a frame
        try:
            args = json.loads(arguments)
        except (ValueError, RecursionError):
            args = None
        if type(args) is not dict:
            parsed = _parse(call_id, name, arguments)
            if isinstance(parsed, ToolCall):
                return parsed
            args = parsed
    else:
        parsed = _parse(call_id, name, arguments)
        if isinstance(parsed, ToolCall):
            return parsed
        args = parsed
    try:
        checksum = tool_call_checksum(name or UNNAMED, args)
    except (TypeError, RecursionError):
        return error_call(
            call_id, name, f"Error: the arguments for {name!r} are nested too deeply."
        )
    tools = ctx.tools
    tool = tools.get_visible(name) if name else None
    if tool is None:
        return _refused(ctx, call_id, name, args, checksum)
    try:
        validated = tool.validate_sync(args)
    except LoopError as exc:
        return build_record(call_id, name, args, checksum, f"Error: {exc}", True)
    if stage is None:  # the handler, inline (no stage: one coroutine less per call)
        try:
            output = await tool.run(
                ctx, args, call_id=call_id, checksum=checksum, validated=validated
            )
        except TurnAbortedError:
            raise
        except LoopError as exc:
            return build_record(call_id, name, args, checksum, f"Error: {exc}", True)
        return completed(ctx, tool, call_id, args, checksum, output, inline_limit)
    call = ToolCallContext(ctx, tool, call_id, args, validated, checksum)
    return await run_stage(stage, call, args, inline_limit)


def _refused(
    ctx: DispatchContext, call_id: str, name: str, args: dict[str, Any], checksum: str
) -> ToolCall:
    """The error record for a call to a tool that is unknown or hidden (never callable).

    The message is the same either way (a hidden tool's existence is not revealed) and names
    the tools the model may use; a hidden tool's refusal is logged as a decision.
    """
    visible = [t.name for t in ctx.tools.visible()]
    shown = name if len(name) <= _NAME_ECHO else name[:_NAME_ECHO] + "..."
    available = ", ".join(visible) or "(none)"
    err = ToolNotFoundError(
        f"unknown tool {shown!r}; available tools: {available}", tool_name=shown
    )
    if ctx.tools.is_hidden(name) and ctx.listening:
        ctx.emit(
            Log(
                turn_id=ctx.turn_id,
                level="info",
                kind="policy.decision",
                message=f"registry: denied {name}: the tool is hidden in this turn",
                payload={
                    "policy": "registry",
                    "tool": name,
                    "checksum": checksum,
                    "call_id": call_id,
                    "iteration": ctx.iteration,
                    "action": "denied",
                    "reason": "the tool is hidden in this turn",
                    "ran": False,
                },
            )
        )
    return build_record(call_id, name or UNNAMED, args, checksum, f"Error: {err}", True)


async def _run(
    ctx: DispatchContext,
    tool: Tool[Any],
    call_id: str,
    args: dict[str, Any],
    checksum: str,
    validated: Any,
    inline_limit: int,
    run_args: Mapping[str, Any] | None = None,
) -> ToolCall:
    """Run the handler on validated arguments and build the record of its outcome.

    The record keeps ``args`` (what the model sent); guards see ``run_args`` when a
    ``tool_call`` hook replaced them.
    """
    try:
        output = await tool.run(
            ctx,
            args if run_args is None else run_args,
            call_id=call_id,
            checksum=checksum,
            validated=validated,
        )
    except TurnAbortedError:
        raise
    except LoopError as exc:
        return build_record(call_id, tool.name, args, checksum, f"Error: {exc}", True)
    return completed(ctx, tool, call_id, args, checksum, output, inline_limit)


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
        return await _run(
            call.dispatch,
            call.tool,
            call.call_id,
            self.args,
            call.checksum,
            call.args,
            self.inline_limit,
            call.raw_args,
        )


def _parse(call_id: str, name: str, arguments: object) -> dict[str, Any] | ToolCall:
    """The arguments as a dict, or the error record for arguments unusable as given."""
    if isinstance(arguments, Mapping):  # a model seam that already parsed them
        text = json.dumps(dict(arguments))
    elif isinstance(arguments, str):
        text = arguments
    else:
        text = str(arguments)
    try:
        args = json.loads(text) if text.strip() else {}
    except RecursionError:
        return error_call(
            call_id,
            name,
            f"Error: the arguments for {name!r} are nested too deeply; send a flatter JSON object.",
        )
    except ValueError as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return error_call(
            call_id,
            name,
            f"Error: the arguments for {name!r} are not valid JSON ({reason}{where}); "
            "send a JSON object.",
        )
    if not isinstance(args, dict):
        return error_call(
            call_id,
            name,
            f"Error: the arguments for {name!r} must be a JSON object, got {json_kind(args)}.",
        )
    return args


def completed(
    ctx: DispatchContext,
    tool: Tool[Any],
    call_id: str,
    args: dict[str, Any],
    checksum: str,
    output: object,
    inline_limit: int,
) -> ToolCall:
    if isinstance(tool, ArtifactTool):
        body = output if isinstance(output, str) else str(output)
        return build_record(call_id, tool.name, args, checksum, body, from_artifact_tool=True)
    results: ToolCallResults
    inline = False
    if isinstance(output, (str, bytes)):
        results = tool.artifact_class(ctx.spool_write(call_id, output))
        inline = _fits(output, inline_limit)
    elif isinstance(output, (SpooledArtifact, Media)):
        results = output
    elif isinstance(output, Sequence) and output and all(isinstance(m, Media) for m in output):
        results = tuple(output)
    else:
        return build_record(
            call_id,
            tool.name,
            args,
            checksum,
            f"Error: tool {tool.name!r} returned {type(output).__name__}, which is not a "
            "tool output (str, bytes, SpooledArtifact, Media or a list of Media).",
            True,
        )
    return build_record(call_id, tool.name, args, checksum, results, inline=inline)


def _fits(output: str | bytes, limit: int) -> bool:
    """True when ``output`` is at most ``limit`` UTF-8 bytes (encoding only when it matters)."""
    n = len(output)
    if isinstance(output, bytes) or n > limit:
        return n <= limit
    if n * 4 <= limit:  # a character is at most four UTF-8 bytes
        return True
    return len(output.encode("utf-8", "surrogatepass")) <= limit


def error_call(call_id: str, name: str, text: str) -> ToolCall:
    """An error record for a call whose arguments are unusable as given (stored as ``{}``)."""
    return ToolCall.completed(
        id=call_id, tool=name or UNNAMED, args={}, results=text, is_error=True
    )


def json_kind(value: object) -> str:
    """Name a parsed JSON value's kind for an error message (``"an array"``, ``"null"``, ...)."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
