"""What a handler's output becomes on the record: text inline, a spooled artifact, or media.

Text up to the inline limit stays a plain string the model reads whole; longer text and bytes
are written to the turn's spool and wrapped in the tool's artifact class (shown as a handle);
artifacts and media are kept as they are; an artifact query tool's answer is always text.
Structured data (a JSON value, a pydantic model, a dataclass) becomes canonical JSON text
(``canonical_json``: keys sorted, compact), kept like text: inline up to the limit, else spooled
as a `SpooledJsonArtifact` (or the tool's artifact class when it is one) the model queries
with the JSON tools. Anything else is not a tool output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._json import canonical_json
from ..artifacts._artifact import SpooledArtifact
from ..artifacts._forge import ArtifactTool
from ..artifacts._media import Media

if TYPE_CHECKING:
    from .._tool import Tool
    from ..stores._spool import SpoolReader
    from ._toolcall import ToolCallResults

__all__ = [
    "DEFAULT_INLINE_LIMIT",
    "JsonProblem",
    "Outcome",
    "Spool",
    "is_tool_output",
    "json_text",
    "outcome_of",
]

DEFAULT_INLINE_LIMIT: Final = 4096
"""Text results up to this many UTF-8 bytes are shown to the model whole."""

Outcome = tuple["ToolCallResults", bool, bool]
"""``(results, inline, from_artifact_tool)`` of a handler's output."""


class Spool(Protocol):
    """Where a result body is kept (a `TurnState`, a context): ``spool_write(call_id, data)``."""

    def spool_write(self, call_id: str, data: str | bytes) -> SpoolReader:
        """Keep ``data`` under the call's id; return its reader."""
        ...


def outcome_of(
    tool: Tool[Any], output: object, inline_limit: int, spool: Spool, call_id: str
) -> Outcome | str:
    """The results of ``tool``'s ``output``, or the error text when it is not a tool output.

    ``spool.spool_write(call_id, body)`` keeps a body in the turn's spool (only text over
    ``inline_limit``, and bytes).
    """
    if isinstance(tool, ArtifactTool):
        return (output if isinstance(output, str) else str(output)), False, True
    if type(output) is str and (len(output) * 4 <= inline_limit or _fits(output, inline_limit)):
        return output, True, False  # shown whole: kept as the plain string, never spooled
    if isinstance(output, str | bytes):
        reader = spool.spool_write(call_id, output)
        return tool.artifact_class(reader), _fits(output, inline_limit), False
    if isinstance(output, SpooledArtifact | Media):
        return output, False, False
    if isinstance(output, Sequence) and output and all(isinstance(m, Media) for m in output):
        return tuple(output), False, False
    text = json_text(output)
    if text is None:
        return (
            f"Error: tool {tool.name!r} returned {type(output).__name__}, which is not a tool "
            "output (str, bytes, SpooledArtifact, Media or a list of Media, JSON data, a "
            "pydantic model or a dataclass)."
        )
    if isinstance(text, JsonProblem):
        return f"Error: tool {tool.name!r} returned {type(output).__name__}: {text.reason}"
    if _fits(text, inline_limit):
        return text, True, False
    from ..artifacts._json_artifact import SpooledJsonArtifact  # lazily: docs/architecture.md

    cls = tool.artifact_class
    artifact = cls if issubclass(cls, SpooledJsonArtifact) else SpooledJsonArtifact
    return artifact(spool.spool_write(call_id, text)), False, False


def is_tool_output(tool: Tool[Any], output: object) -> bool:
    """Whether `outcome_of` makes results of ``output`` (not the error text of a non-output).

    Nothing is spooled: a hook asks this (``ToolCallContext.is_error``) before the record is
    built. Structured output is written as JSON to find out, as `outcome_of` writes it again.
    """
    if isinstance(tool, ArtifactTool) or isinstance(output, str | bytes | SpooledArtifact | Media):
        return True
    if isinstance(output, Sequence) and output and all(isinstance(m, Media) for m in output):
        return True
    return isinstance(json_text(output), str)


class JsonProblem:
    """Why structured output could not be written as JSON (a value inside is not JSON)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        """Keep the reason."""
        self.reason = reason


def json_text(output: object) -> str | JsonProblem | None:
    """Canonical JSON for structured output; None when ``output`` is not structured at all.

    JSON values (dicts with string keys, lists, tuples, numbers, booleans, None), pydantic
    models and dataclasses qualify; what they hold is converted as pydantic converts it to JSON
    (datetimes and UUIDs to strings, nested models and dataclasses to objects).
    """
    if not (
        output is None
        or isinstance(output, Mapping | Sequence | int | float)
        or hasattr(type(output), "__pydantic_fields__")
        or (dataclasses.is_dataclass(output) and not isinstance(output, type))
    ):
        return None
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return canonical_json(to_jsonable_python(output))
    except (PydanticSerializationError, TypeError, ValueError, RecursionError) as exc:
        return JsonProblem(f"which cannot be written as JSON ({exc})")


def _fits(output: str | bytes, limit: int) -> bool:
    """True when ``output`` is at most ``limit`` UTF-8 bytes (encoding only when it matters)."""
    n = len(output)
    if isinstance(output, bytes) or n > limit:
        return n <= limit
    if n * 4 <= limit:  # a character is at most four UTF-8 bytes
        return True
    return len(output.encode("utf-8", "surrogatepass")) <= limit
