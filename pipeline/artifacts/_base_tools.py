"""The base query tools every artifact offers: head, tail, grep, cat, sizes, tokens.

`SpooledArtifact.tool_methods` is `BASE_TOOL_METHODS`, imported when first read (the argument
models are pydantic models: docs/architecture.md, "Import time"); the line tools render within
the result cap (``_capped.py``) and ``artifact_grep`` has a wall-clock limit (its grep budget).
"""

from __future__ import annotations

from typing import Any

from ._args import CatArgs, CountArgs, GrepArgs, NoArgs, TokenArgs
from ._capped import capped_cat, capped_grep, capped_head, capped_tail
from ._toolmethod import ToolMethod

__all__ = ["BASE_TOOL_METHODS"]


def _grep_time_limit(artifact: Any) -> float:
    limit: float = artifact.grep_time_limit()
    return limit


BASE_TOOL_METHODS: tuple[ToolMethod, ...] = (
    ToolMethod(
        name="artifact_head",
        method="head",
        description="Return the first n lines of a spooled tool result.",
        args_schema=CountArgs,
        capped=capped_head,
    ),
    ToolMethod(
        name="artifact_tail",
        method="tail",
        description="Return the last n lines of a spooled tool result.",
        args_schema=CountArgs,
        capped=capped_tail,
    ),
    ToolMethod(
        name="artifact_grep",
        method="grep",
        description=(
            "Search each line of a spooled tool result with a Python regular expression; "
            "returns the matching lines as 'INDEX:line' with 0-based line indexes "
            "(optionally only lines [start_line, end_line))."
        ),
        args_schema=GrepArgs,
        capped=capped_grep,
        time_limit=_grep_time_limit,
    ),
    ToolMethod(
        name="artifact_cat",
        method="cat",
        description=(
            "Return lines [start:end] of a spooled tool result (0-based, end exclusive, "
            "negative indexes count from the end)."
        ),
        args_schema=CatArgs,
        capped=capped_cat,
    ),
    ToolMethod(
        name="artifact_byte_length",
        method="byte_length",
        description="Return the size of a spooled tool result in bytes.",
        args_schema=NoArgs,
    ),
    ToolMethod(
        name="artifact_line_count",
        method="line_count",
        description="Return the number of lines of a spooled tool result.",
        args_schema=NoArgs,
    ),
    ToolMethod(
        name="artifact_estimate_tokens",
        method="estimate_tokens",
        description="Estimate how many tokens a spooled tool result would take in full.",
        args_schema=TokenArgs,
    ),
)
