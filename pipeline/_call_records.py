"""Turning a tool call's outcome into its `ToolCall` record (the only place records are built).

Parsing the provider's argument text, the records of calls that cannot run, and the record of a
handler's output: text and bytes inlined or spooled as an artifact, artifact-tool answers kept
as text, media as they are. Used by ``pipeline/_tool_calls.py`` and
``pipeline/_tool_call_stage.py``; see ``docs/architecture.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ._errors import LoopError, TurnAbortedError
from ._toolcall import ToolCall, ToolCallResults, build_record
from .artifacts._artifact import SpooledArtifact
from .artifacts._forge import ArtifactTool
from .artifacts._media import Media

if TYPE_CHECKING:
    from ._dispatch import DispatchContext
    from ._tool import Tool

__all__ = [
    "DEFAULT_INLINE_LIMIT",
    "NAME_ECHO",
    "UNNAMED",
    "completed",
    "error_call",
    "json_kind",
    "parse_arguments",
    "run_and_record",
    "shown_name",
]

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
"""The exact types of JSON scalars as ``json.loads`` gives them (no subclasses)."""

DEFAULT_INLINE_LIMIT: Final = 4096
"""Text results up to this many UTF-8 bytes are shown to the model whole."""

UNNAMED: Final = "(unnamed)"
"""The tool name stored for a proposed call that named no tool."""

NAME_ECHO: Final = 64
"""How much of a proposed tool name a record or an error text keeps (a tool name is at most 64
characters, so only a name no tool can have is cut: a 1 MB name must not come back whole)."""


def shown_name(name: str) -> str:
    """``name`` as records and error texts show it: cut to `NAME_ECHO` characters and ``...``."""
    return name if len(name) <= NAME_ECHO else name[:NAME_ECHO] + "..."


async def run_and_record(
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


def parse_arguments(call_id: str, name: str, arguments: object) -> dict[str, Any] | ToolCall:
    """The arguments as a dict, or the error record for arguments unusable as given."""
    shown = shown_name(name)
    if isinstance(arguments, Mapping):  # a model seam (or the MCP gateway) parsed them already
        if type(arguments) is dict and all(
            type(key) is str and type(value) in _SCALARS for key, value in arguments.items()
        ):
            return dict(arguments)  # flat JSON scalars: what the JSON round trip would give
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
            f"Error: the arguments for {shown!r} are nested too deeply; "
            "send a flatter JSON object.",
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
            f"Error: the arguments for {shown!r} are not valid JSON ({reason}{where}); "
            "send a JSON object.",
        )
    if not isinstance(args, dict):
        return error_call(
            call_id,
            name,
            f"Error: the arguments for {shown!r} must be a JSON object, got {json_kind(args)}.",
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
    name: str | None = None,
) -> ToolCall:
    """The record of a call whose handler returned ``output`` (``name``: the tool's, if known).

    Text up to ``inline_limit`` UTF-8 bytes stays a plain string; longer text and bytes are
    spooled into the tool's artifact class; anything that is not a tool output is an error.
    """
    if isinstance(tool, ArtifactTool):
        body = output if isinstance(output, str) else str(output)
        return build_record(call_id, tool.name, args, checksum, body, from_artifact_tool=True)
    results: ToolCallResults
    inline = False
    if type(output) is str and (len(output) * 4 <= inline_limit or _fits(output, inline_limit)):
        # Shown whole to the model: kept as the plain string, never spooled (DESIGN 12).
        return build_record(call_id, name or tool.name, args, checksum, output, inline=True)
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
        id=call_id, tool=shown_name(name) or UNNAMED, args={}, results=text, is_error=True
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
