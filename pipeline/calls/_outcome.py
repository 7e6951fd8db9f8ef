"""What a handler's output becomes on the record: text inline, a spooled artifact, or media.

Text up to the inline limit stays a plain string the model reads whole; longer text and bytes
are written to the turn's spool and wrapped in the tool's artifact class (shown as a handle);
artifacts and media are kept as they are; an artifact query tool's answer is always text.
Anything else is not a tool output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..artifacts._artifact import SpooledArtifact
from ..artifacts._forge import ArtifactTool
from ..artifacts._media import Media

if TYPE_CHECKING:
    from .._tool import Tool
    from ..stores._spool import SpoolReader
    from ._toolcall import ToolCallResults

__all__ = ["DEFAULT_INLINE_LIMIT", "Outcome", "Spool", "outcome_of"]

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
    return (
        f"Error: tool {tool.name!r} returned {type(output).__name__}, which is not a tool "
        "output (str, bytes, SpooledArtifact, Media or a list of Media)."
    )


def _fits(output: str | bytes, limit: int) -> bool:
    """True when ``output`` is at most ``limit`` UTF-8 bytes (encoding only when it matters)."""
    n = len(output)
    if isinstance(output, bytes) or n > limit:
        return n <= limit
    if n * 4 <= limit:  # a character is at most four UTF-8 bytes
        return True
    return len(output.encode("utf-8", "surrogatepass")) <= limit
