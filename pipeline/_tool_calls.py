"""Running one proposed call into a completed `ToolCall`: the one place records are built.

`DispatchContext.run_tool` (and so every executor, built-in or not) goes through
`run_tool_call`: parse the provider's argument text, find the tool, run it with the provider's
call id (`Tool.run`), and turn the output (or the failure) into a record: text and bytes are
inlined or spooled as an artifact, artifact-tool answers stay text, media pass as they are, and
every failure the model should see becomes an error record. See ``docs/architecture.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._errors import LoopError, ToolNotFoundError, TurnAbortedError
from ._json import tool_call_checksum
from ._toolcall import ToolCall, ToolCallResults, build_record
from .artifacts._artifact import SpooledArtifact
from .artifacts._forge import ArtifactTool
from .artifacts._media import Media

if TYPE_CHECKING:
    from ._dispatch import DispatchContext
    from ._tool import Tool

__all__ = ["DEFAULT_INLINE_LIMIT", "UNNAMED", "error_call", "run_tool_call"]

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
) -> ToolCall:
    """Run one proposed call on ``ctx`` and return its completed record (see the module doc).

    Raises:
        TurnAbortedError: the handler (or a guard) aborted the turn.
    """
    args = _parse(call_id, name, arguments)
    if isinstance(args, ToolCall):
        return args
    try:
        checksum = tool_call_checksum(name or UNNAMED, args)
    except (TypeError, RecursionError):
        return error_call(
            call_id, name, f"Error: the arguments for {name!r} are nested too deeply."
        )
    tool = ctx.tools.get(name) if name else None
    if tool is None:
        available = ", ".join(t.name for t in ctx.tools.visible()) or "(none)"
        err = ToolNotFoundError(
            f"unknown tool {name!r}; available tools: {available}", tool_name=name
        )
        return build_record(call_id, name or UNNAMED, args, checksum, f"Error: {err}", True)
    try:
        output = await tool.run(ctx, args, call_id=call_id, checksum=checksum)
    except TurnAbortedError:
        raise
    except LoopError as exc:
        return build_record(call_id, name, args, checksum, f"Error: {exc}", True)
    return _completed(ctx, tool, call_id, args, checksum, output, inline_limit)


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


def _completed(
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
