"""The JSON query tools (`JSON_TOOL_METHODS`) of `SpooledJsonArtifact`.

Imported when ``SpooledJsonArtifact.tool_methods`` is first read, not on ``import pipeline``:
the argument models are pydantic models (docs/architecture.md, "Import time"). The renderers
are in ``_json_tools.py``.
"""

from __future__ import annotations

from ._args import NoArgs, PathArgs, SliceArgs
from ._json_tools import capped_filter, capped_get, capped_keys, capped_pluck, capped_slice
from ._toolmethod import ToolMethod

__all__ = ["JSON_TOOL_METHODS"]


JSON_TOOL_METHODS: tuple[ToolMethod, ...] = (
    ToolMethod(
        "artifact_json_type",
        "json_type",
        "Return the format of a spooled JSON result: json, jsonl (JSON Lines) or json5.",
        NoArgs,
    ),
    ToolMethod(
        "artifact_json_keys",
        "json_keys",
        "Return the keys of a spooled JSON object (for an array or JSON Lines: the keys of "
        "its objects).",
        NoArgs,
        capped=capped_keys,
    ),
    ToolMethod(
        "artifact_json_length",
        "json_length",
        "Return the number of records of a spooled JSON result (JSON Lines: one per line; a "
        "single document: 1).",
        NoArgs,
    ),
    ToolMethod(
        "artifact_json_get",
        "json_get",
        "Return every value matching a JSONPath expression, as a list (JSON Lines: matched "
        "in each record); [] when nothing matches.",
        PathArgs,
        capped=capped_get,
    ),
    ToolMethod(
        "artifact_json_filter",
        "json_filter",
        "Return the records in which a JSONPath expression matches (filters like "
        "$[?(@.price > 10)] work).",
        PathArgs,
        capped=capped_filter,
    ),
    ToolMethod(
        "artifact_json_pluck",
        "json_pluck",
        "The same as artifact_json_get: every value matching a JSONPath expression.",
        PathArgs,
        capped=capped_pluck,
    ),
    ToolMethod(
        "artifact_json_slice",
        "json_slice",
        "Return records [start:end] of a spooled JSON result (JSON Lines; a single document "
        "is one record; negative indexes count back).",
        SliceArgs,
        capped=capped_slice,
    ),
)
