"""`SpooledJsonArtifact`: a spooled JSON, JSON Lines or JSON5 result, queried with JSONPath.

The document is parsed on the first JSON query and kept (JSON queries need the whole value).
JSON Lines (``jsonl``/``ndjson``: one value per line, blank lines skipped) is treated as an array
of its records by every query. Paths use jsonpath-ng's extended syntax (filters such as
``$.items[?(@.price > 10)]``, ``len``, arithmetic). Line numbers in error messages are 0-based
line indexes, as everywhere in the artifact API.

Errors: a path that does not parse, or a query that does not fit the document (``json_keys`` of
a number, ``json_get`` with no match), raises `InvalidToolArgsError`; content that does not parse
in its format raises `ToolDownstreamError` naming the line (``.line``, 0-based) and the format.
A body that does not parse is not parsed again: later queries raise the same error. Parsing
and format inference live in ``_json_formats`` (JSON5 is only tried up to a size bound,
``json5_max_bytes``, since its parser is slow and cannot be interrupted).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from jsonpath_ng.ext.parser import parse as _parse_jsonpath
from jsonpath_ng.jsonpath import JSONPath
from pydantic import Field, field_validator

from .._errors import InvalidToolArgsError, ToolDownstreamError
from ._args import ArgsModel, NoArgs
from ._artifact import SpooledArtifact
from ._json_formats import (
    JSON5_MAX_BYTES,
    infer_json,
    json5_size_error,
    parse_json,
    parse_json5,
    parse_lines,
)
from ._toolmethod import ToolMethod

if TYPE_CHECKING:
    from ..stores._spool import SpoolReader

__all__ = ["JsonFormat", "SpooledJsonArtifact", "compile_jsonpath"]

JsonFormat = Literal["json", "jsonl", "ndjson", "json5"]
_FORMATS: frozenset[str] = frozenset(get_args(JsonFormat))
_NOT_PARSED = object()


@lru_cache(maxsize=512)
def compile_jsonpath(path: str) -> JSONPath:
    """Parse a JSONPath expression (extended syntax), cached.

    Raises:
        InvalidToolArgsError: the expression does not parse.
    """
    candidate: object = path
    if not isinstance(candidate, str) or not candidate.strip():
        raise InvalidToolArgsError("path must be a non-empty JSONPath expression", field="path")
    try:
        return _parse_jsonpath(path)
    except Exception as exc:  # jsonpath-ng raises several unrelated exception types
        raise InvalidToolArgsError(f"invalid JSONPath {path!r}: {exc}", field="path") from exc


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class SpooledJsonArtifact(SpooledArtifact):
    """A spooled result holding JSON (``json``), JSON Lines (``jsonl``/``ndjson``) or JSON5.

    ``format`` may be given; when None (the default, or the class's ``json_format``), it is
    inferred on first use: the whole body as JSON, else every non-blank line as JSON (JSON
    Lines), else JSON5. Subclass and set ``json_format`` to fix the format for a tool's
    ``artifact_constructor``. JSON5 is only parsed up to ``json5_max_bytes``.
    """

    __slots__ = ("_document", "_error", "_format")

    json_format: ClassVar[JsonFormat | None] = None
    """The format instances use when none is given; None means inferred."""

    json5_max_bytes: ClassVar[int] = JSON5_MAX_BYTES
    """The largest body parsed as JSON5 (a subclass may raise it, at the cost of slow parses)."""

    def __init__(self, reader: SpoolReader, format: JsonFormat | None = None) -> None:
        """Wrap ``reader``; ``format`` fixes the format instead of inferring it."""
        super().__init__(reader)
        chosen = format if format is not None else self.json_format
        given: object = chosen  # checked at run time whatever the annotation says
        if given is not None and (not isinstance(given, str) or given not in _FORMATS):
            raise InvalidToolArgsError(
                f"unknown JSON format {chosen!r}: use one of {sorted(_FORMATS)}", field="format"
            )
        self._format: str | None = chosen
        self._document: Any = _NOT_PARSED
        self._error: ToolDownstreamError | None = None

    @property
    def format(self) -> str:
        """The format of the body (inferring it parses the document)."""
        self.document()
        assert self._format is not None  # set by document()
        return self._format

    def document(self) -> Any:
        """Return the parsed document (JSON Lines: the list of records), parsing it once.

        Raises:
            ToolDownstreamError: the body does not parse (the message names the line), or is
                too large for JSON5 (see ``json5_max_bytes``).
        """
        document = self._document
        if document is not _NOT_PARSED:
            return document
        if self._error is not None:
            raise self._error.with_traceback(None)
        try:
            document = self._document = self._parse()
        except ToolDownstreamError as exc:
            self._error = exc
            raise
        return document

    def _parse(self) -> Any:
        fmt = self._format
        if fmt == "json":
            return parse_json(self.as_string())
        if fmt in ("jsonl", "ndjson"):
            return parse_lines(self.lines(), fmt)
        if fmt == "json5":
            too_large = json5_size_error(self.byte_length(), self.json5_max_bytes)
            if too_large is not None:
                raise ToolDownstreamError(too_large, line=None, format="json5")
            return parse_json5(self.as_string())
        self._format, document = infer_json(
            self.as_string(), self.byte_length(), self.json5_max_bytes
        )
        return document

    def json_type(self) -> str:
        """Return the JSON type of the document: object, array, string, number, boolean, null."""
        return _json_type(self.document())

    def json_keys(self) -> list[str]:
        """Return the keys of an object document; for an array, the union of its objects' keys.

        Raises:
            InvalidToolArgsError: the document is neither an object nor an array.
        """
        document = self.document()
        if isinstance(document, dict):
            return [str(key) for key in document]
        if isinstance(document, list):
            seen: dict[str, None] = {}
            for item in document:
                if isinstance(item, dict):
                    seen.update(dict.fromkeys(str(key) for key in item))
            return list(seen)
        raise InvalidToolArgsError(
            f"json_keys needs an object or an array; the document is a {_json_type(document)}"
        )

    def json_length(self) -> int:
        """Return the number of items (array), keys (object) or characters (string).

        Raises:
            InvalidToolArgsError: the document is a number, a boolean or null.
        """
        document = self.document()
        if isinstance(document, list | dict | str):
            return len(document)
        raise InvalidToolArgsError(
            f"json_length needs an array, object or string; the document is a "
            f"{_json_type(document)}"
        )

    def json_get(self, path: str) -> Any:
        """Return the value of the first match of JSONPath ``path``.

        Raises:
            InvalidToolArgsError: the path does not parse, or matches nothing.
        """
        matches = compile_jsonpath(path).find(self.document())
        if not matches:
            raise InvalidToolArgsError(f"no value matches {path!r}", field="path")
        return matches[0].value

    def json_filter(self, path: str) -> list[Any]:
        """Return the values of every match of JSONPath ``path`` (``[]`` when none).

        Raises:
            InvalidToolArgsError: the path does not parse.
        """
        return [match.value for match in compile_jsonpath(path).find(self.document())]

    def json_pluck(self, path: str) -> list[Any]:
        """Return, for each item of the array document, its first match of ``path`` (or None).

        ``path`` is relative to each item: ``name``, ``$.name`` and ``$.user.id`` all work.

        Raises:
            InvalidToolArgsError: the path does not parse, or the document is not an array.
        """
        expression = compile_jsonpath(path)
        document = self.document()
        if not isinstance(document, list):
            raise InvalidToolArgsError(
                f"json_pluck needs an array; the document is a {_json_type(document)}"
            )
        plucked: list[Any] = []
        for item in document:
            matches = expression.find(item)
            plucked.append(matches[0].value if matches else None)
        return plucked

    def json_slice(self, start: int | None = None, end: int | None = None) -> list[Any]:
        """Return items ``[start:end]`` of the array document (Python slice semantics).

        Raises:
            InvalidToolArgsError: the document is not an array, or a bound is not an integer.
        """
        for name, bound in (("start", start), ("end", end)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise InvalidToolArgsError(f"{name} must be an integer or null", field=name)
        document = self.document()
        if not isinstance(document, list):
            raise InvalidToolArgsError(
                f"json_slice needs an array; the document is a {_json_type(document)}"
            )
        return document[start:end]

    def __repr__(self) -> str:
        """Return the class, format (if known), byte length and line count."""
        fmt = f" {self._format}" if self._format is not None else ""
        return f"<{type(self).__name__}{fmt} {self.byte_length()} bytes, {self.line_count()} lines>"


class PathArgs(ArgsModel):
    """A JSONPath expression."""

    path: str = Field(description="JSONPath expression (extended syntax), e.g. $.items[0].name.")

    @field_validator("path")
    @classmethod
    def _valid_path(cls, value: str) -> str:
        try:
            compile_jsonpath(value)
        except InvalidToolArgsError as exc:
            raise ValueError(exc.message) from None
        return value


class SliceArgs(ArgsModel):
    """A range of array items with Python slice semantics."""

    start: int | None = Field(default=None, description="First item index (negative: from end).")
    end: int | None = Field(default=None, description="Index after the last item (exclusive).")


SpooledJsonArtifact.tool_methods = (
    ToolMethod(
        "artifact_json_type",
        "json_type",
        "Return the JSON type of a spooled JSON result (JSON Lines count as an array).",
        NoArgs,
    ),
    ToolMethod(
        "artifact_json_keys",
        "json_keys",
        "Return the keys of a spooled JSON object (for an array: its objects' keys).",
        NoArgs,
    ),
    ToolMethod(
        "artifact_json_length",
        "json_length",
        "Return the number of items, keys or characters of a spooled JSON result.",
        NoArgs,
    ),
    ToolMethod(
        "artifact_json_get",
        "json_get",
        "Return the first value matching a JSONPath expression in a spooled JSON result.",
        PathArgs,
    ),
    ToolMethod(
        "artifact_json_filter",
        "json_filter",
        "Return every value matching a JSONPath expression (filters like "
        "$.items[?(@.price > 10)] work).",
        PathArgs,
    ),
    ToolMethod(
        "artifact_json_pluck",
        "json_pluck",
        "For each item of a spooled JSON array, return the value at a path relative to "
        "the item (null when missing).",
        PathArgs,
    ),
    ToolMethod(
        "artifact_json_slice",
        "json_slice",
        "Return items [start:end] of a spooled JSON array (negative indexes count back).",
        SliceArgs,
    ),
)

SpooledJsonArtifact.__module__ = "pipeline"
