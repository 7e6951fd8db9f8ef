"""The JSON query tools (`JSON_TOOL_METHODS`): argument models and capped renderers (``_cap.py``).

List results stream from the artifact's records and stop at the cap; the note gives the
``offset`` (``artifact_json_get``, ``pluck``, ``filter``) or ``start`` (``artifact_json_slice``)
that reads on from there.
"""

from __future__ import annotations

import json
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from .._errors import InvalidToolArgsError
from ._args import ArgsModel, NoArgs
from ._cap import cap_items
from ._toolmethod import ToolMethod

if TYPE_CHECKING:
    from jsonpath_ng.jsonpath import JSONPath

    from ._json_artifact import SpooledJsonArtifact

__all__ = [
    "JSON_TOOL_METHODS",
    "PathArgs",
    "SliceArgs",
    "capped_filter",
    "capped_get",
    "capped_keys",
    "capped_pluck",
    "capped_slice",
    "compile_jsonpath",
]


@lru_cache(maxsize=512)
def compile_jsonpath(path: str) -> JSONPath:
    """Parse a JSONPath expression (extended syntax), cached; jsonpath-ng loads on first use.

    Raises:
        InvalidToolArgsError: the expression does not parse.
    """
    candidate: object = path
    if not isinstance(candidate, str) or not candidate.strip():
        raise InvalidToolArgsError("path must be a non-empty JSONPath expression", field="path")
    from jsonpath_ng.ext.parser import parse

    try:
        return parse(path)
    except Exception as exc:  # jsonpath-ng raises several unrelated exception types
        raise InvalidToolArgsError(f"invalid JSONPath {path!r}: {exc}", field="path") from exc


class PathArgs(ArgsModel):
    """A JSONPath expression, and how many results to skip."""

    path: str = Field(description="JSONPath expression (extended syntax), e.g. $.items[0].name.")
    offset: int = Field(
        default=0, ge=0, description="Skip this many results (to read on past a capped result)."
    )

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        try:
            compile_jsonpath(value)
        except InvalidToolArgsError as exc:
            raise ValueError(exc.message) from None
        return value


class SliceArgs(ArgsModel):
    """A range of records with Python slice semantics."""

    start: int | None = Field(default=None, description="First record index (negative: from end).")
    end: int | None = Field(default=None, description="Index after the last record (exclusive).")


def _again(tool: str, path: str, offset: int) -> str:
    return f"read the rest with {tool}(path={json.dumps(path)}, offset={offset})"


def capped_get(artifact: SpooledJsonArtifact, cap: int, path: str, offset: int = 0) -> str:
    """Render ``json_get(path)`` from match ``offset`` on, within ``cap`` bytes."""
    matches = islice(artifact.iter_get(path), offset, None)
    return cap_items(matches, cap, lambda k: _again("artifact_json_get", path, offset + k))


def capped_pluck(artifact: SpooledJsonArtifact, cap: int, path: str, offset: int = 0) -> str:
    """Render ``json_pluck(path)`` (the same as `capped_get`) within ``cap`` bytes."""
    matches = islice(artifact.iter_get(path), offset, None)
    return cap_items(matches, cap, lambda k: _again("artifact_json_pluck", path, offset + k))


def capped_filter(artifact: SpooledJsonArtifact, cap: int, path: str, offset: int = 0) -> str:
    """Render ``json_filter(path)`` from record ``offset`` on, within ``cap`` bytes."""
    records = islice(artifact.iter_filter(path), offset, None)
    return cap_items(records, cap, lambda k: _again("artifact_json_filter", path, offset + k))


def capped_slice(
    artifact: SpooledJsonArtifact, cap: int, start: int | None = None, end: int | None = None
) -> str:
    """Render ``json_slice(start, end)`` within ``cap`` bytes."""
    first, stop = artifact.record_range(start, end)
    records = artifact.iter_slice(first, stop)
    bound = "" if stop is None else f", end={stop}"
    return cap_items(
        records, cap, lambda k: f"read the rest with artifact_json_slice(start={first + k}{bound})"
    )


def capped_keys(artifact: SpooledJsonArtifact, cap: int) -> str:
    """Render ``json_keys()`` within ``cap`` bytes."""
    keys: Any = artifact.json_keys()
    return cap_items(
        keys, cap, lambda k: "read the values of the keys you need with artifact_json_get"
    )


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
