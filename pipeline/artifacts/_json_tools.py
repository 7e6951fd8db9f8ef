"""The JSON query tools' capped renderers (``_cap.py``) and JSONPath compilation.

List results stream from the artifact's records and stop at the cap; the note gives the
``offset`` (``artifact_json_get``, ``pluck``, ``filter``) or ``start`` (``artifact_json_slice``)
that reads on from there.
"""

from __future__ import annotations

import json
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

from .._errors import InvalidToolArgsError
from ._cap import cap_items

if TYPE_CHECKING:
    from jsonpath_ng.jsonpath import JSONPath

    from ._json_artifact import SpooledJsonArtifact

__all__ = [
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
