"""Running one proposed call into its completed `ToolCall`.

`DispatchContext.run_tool` (and so every executor, built-in or not) goes through
`run_tool_call`: parse the provider's argument text, checksum it, find the tool among the
visible ones (a hidden tool is not callable), validate, run the ``tool_call`` stage
(``pipeline/_tool_call_stage.py``) around the handler, which `Tool.run` runs with the provider's
call id, and turn the outcome into a record (``pipeline/_call_records.py``, the one place
records are built). Every failure the model should see becomes an error record. See
``docs/architecture.md``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ._call_records import UNNAMED, completed, error_call, parse_arguments, shown_name
from ._errors import LoopError, ToolNotFoundError, TurnAbortedError
from ._events import Log
from ._json import tool_call_checksum
from ._tool_call_ctx import ToolCallContext
from ._tool_call_stage import ToolCallStage, run_stage
from ._toolcall import ToolCall, build_record

if TYPE_CHECKING:
    from ._dispatch import DispatchContext
    from ._registry import ToolRegistry

__all__ = ["run_tool_call"]

_decode: Final = json.JSONDecoder().raw_decode  # `json.loads` without its two Python frames
_JSON_SPACE: Final = " \t\n\r"


async def run_tool_call(
    ctx: DispatchContext,
    tools: ToolRegistry,
    call_id: str,
    name: str,
    arguments: object,
    inline_limit: int,
    stage: ToolCallStage | None,
) -> ToolCall:
    """Run one proposed call on ``ctx`` (whose registry is ``tools``) and return its record.

    See the module doc.

    Raises:
        TurnAbortedError: the handler, a guard or a ``tool_call`` hook aborted the turn.
    """
    if type(arguments) is str and arguments[:1] == "{":  # the common case, without a frame
        try:
            args, end = _decode(arguments)
        except (ValueError, RecursionError):
            args = None
        else:
            if end != len(arguments) and arguments[end:].strip(_JSON_SPACE):
                args = None  # extra data after the object: parse_arguments words the error
        if type(args) is not dict:
            parsed = parse_arguments(call_id, name, arguments)
            if isinstance(parsed, ToolCall):
                return parsed
            args = parsed
    else:
        parsed = parse_arguments(call_id, name, arguments)
        if isinstance(parsed, ToolCall):
            return parsed
        args = parsed
    try:
        checksum = tool_call_checksum(name or UNNAMED, args)
    except (TypeError, RecursionError):
        return error_call(
            call_id, name, f"Error: the arguments for {shown_name(name)!r} are nested too deeply."
        )
    tool = tools.get_visible(name) if name else None
    if tool is None:
        return _refused(ctx, call_id, name, args, checksum)
    if stage is None:  # the handler, inline (no stage: one coroutine less per call)
        try:  # `Tool.run` validates first: bad arguments raise before anything runs
            output = await tool.run(ctx, args, call_id=call_id, checksum=checksum)
        except TurnAbortedError:
            raise
        except LoopError as exc:
            return build_record(call_id, name, args, checksum, f"Error: {exc}", True)
        return completed(ctx, tool, call_id, args, checksum, output, inline_limit, name)
    try:
        validated = tool.validate_sync(args)
    except LoopError as exc:
        return build_record(call_id, name, args, checksum, f"Error: {exc}", True)
    call = ToolCallContext(ctx, tool, call_id, args, validated, checksum)
    return await run_stage(stage, call, args, inline_limit)


def _refused(
    ctx: DispatchContext, call_id: str, name: str, args: dict[str, Any], checksum: str
) -> ToolCall:
    """The error record for a call to a tool that is unknown or hidden (never callable).

    The message is the same either way (a hidden tool's existence is not revealed) and names
    the tools the model may use; a hidden tool's refusal is logged as a decision. A name no
    tool could have (longer than 64 characters) is kept cut short, in the text and the record.
    """
    visible = [t.name for t in ctx.tools.visible()]
    shown = shown_name(name)
    if shown is not name:
        checksum = tool_call_checksum(shown, args)
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
    return build_record(call_id, shown or UNNAMED, args, checksum, f"Error: {err}", True)
