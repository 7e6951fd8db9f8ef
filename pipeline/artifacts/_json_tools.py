"""The JSON query tools' capped renderers (``_cap.py``).

List results stream from the artifact's records and stop at the cap; the note gives the
``offset`` (``artifact_json_get``, ``pluck``, ``filter``) or ``start`` (``artifact_json_slice``)
that reads on from there. The renderers read an artifact through `JsonQueries` (the part of
`SpooledJsonArtifact`'s API they use), so they do not name the class that names them (see
``_capped.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from typing import Any, Protocol

from ._cap import cap_items

__all__ = [
    "JsonQueries",
    "capped_filter",
    "capped_get",
    "capped_keys",
    "capped_pluck",
    "capped_slice",
]


class JsonQueries(Protocol):
    """What the JSON tools' renderers read of an artifact; `SpooledJsonArtifact` has it."""

    def iter_get(self, path: str) -> Iterator[Any]:
        """Yield every value matching JSONPath ``path`` in each record, in order."""
        ...

    def iter_filter(self, path: str) -> Iterator[Any]:
        """Yield the records in which JSONPath ``path`` matches something."""
        ...

    def record_range(
        self, start: int | None = None, end: int | None = None
    ) -> tuple[int, int | None]:
        """Return the ``(first, stop)`` record indexes ``json_slice`` reads."""
        ...

    def iter_slice(self, first: int, stop: int | None) -> Iterator[Any]:
        """Yield records ``first`` to ``stop`` (a `record_range`)."""
        ...

    def json_keys(self) -> list[str]:
        """Return the keys of an object root, or the union of the keys of the object items."""
        ...


def _again(tool: str, path: str, offset: int) -> str:
    return f"read the rest with {tool}(path={json.dumps(path)}, offset={offset})"


def capped_get(artifact: JsonQueries, cap: int, path: str, offset: int = 0) -> str:
    """Render ``json_get(path)`` from match ``offset`` on, within ``cap`` bytes."""
    matches = islice(artifact.iter_get(path), offset, None)
    return cap_items(matches, cap, lambda k: _again("artifact_json_get", path, offset + k))


def capped_pluck(artifact: JsonQueries, cap: int, path: str, offset: int = 0) -> str:
    """Render ``json_pluck(path)`` (the same as `capped_get`) within ``cap`` bytes."""
    matches = islice(artifact.iter_get(path), offset, None)
    return cap_items(matches, cap, lambda k: _again("artifact_json_pluck", path, offset + k))


def capped_filter(artifact: JsonQueries, cap: int, path: str, offset: int = 0) -> str:
    """Render ``json_filter(path)`` from record ``offset`` on, within ``cap`` bytes."""
    records = islice(artifact.iter_filter(path), offset, None)
    return cap_items(records, cap, lambda k: _again("artifact_json_filter", path, offset + k))


def capped_slice(
    artifact: JsonQueries, cap: int, start: int | None = None, end: int | None = None
) -> str:
    """Render ``json_slice(start, end)`` within ``cap`` bytes."""
    first, stop = artifact.record_range(start, end)
    records = artifact.iter_slice(first, stop)
    bound = "" if stop is None else f", end={stop}"
    return cap_items(
        records, cap, lambda k: f"read the rest with artifact_json_slice(start={first + k}{bound})"
    )


def capped_keys(artifact: JsonQueries, cap: int) -> str:
    """Render ``json_keys()`` within ``cap`` bytes."""
    keys: Any = artifact.json_keys()
    return cap_items(
        keys, cap, lambda k: "read the values of the keys you need with artifact_json_get"
    )
