"""JSONPath expressions: parsed once (cached), with jsonpath-ng loaded on the first one.

The JSON artifact's queries and the ``path`` argument of its query tools (``_args.py``) both
compile through `compile_jsonpath`, so a path the argument model accepts is one the query runs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import InvalidToolArgsError

if TYPE_CHECKING:
    from jsonpath_ng.jsonpath import JSONPath

__all__ = ["compile_jsonpath"]


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
