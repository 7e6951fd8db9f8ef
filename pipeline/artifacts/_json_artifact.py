"""`SpooledJsonArtifact`: a spooled JSON, JSON Lines or JSON5 result, queried with JSONPath.

Queries read *records*, as the seeds do: the values of JSON Lines (``jsonl``/``ndjson``: one
value per line, blank lines skipped), or the one root of a single document (``json``,
``json5``). ``json_type`` is the format; ``json_get(path)`` (and ``json_pluck``, the same) returns
every match in every record as a list, ``[]`` when nothing matches; ``json_filter(path)`` the
records in which the path matches; ``json_slice(start, end)`` and ``json_length()`` slice and
count records. Paths use jsonpath-ng's extended syntax (filters such as
``$.items[?(@.price > 10)]``, ``len``, arithmetic), loaded on the first query. Line numbers in
error messages are 0-based line indexes, as everywhere in the artifact API.

A document (or JSON Lines up to ``json_max_bytes``) is parsed on the first JSON query and kept;
larger JSON Lines bodies are parsed line by line by each query, so memory stays flat.

Errors: a path that does not parse, or ``json_keys`` of a scalar, raises `InvalidToolArgsError`;
content that does not parse in its format raises `ToolDownstreamError` naming the line
(``.line``, 0-based) and the format. A body that does not parse is not parsed again: later
queries raise the same error. Parsing and format inference live in ``_json_formats`` (JSON5 is
only tried up to a size bound, ``json5_max_bytes``, since its parser is slow and cannot be
interrupted).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from ..errors import InvalidToolArgsError, ToolDownstreamError
from ._artifact import SpooledArtifact
from ._json_formats import (
    JSON5_MAX_BYTES,
    infer_json,
    iter_records,
    json5_size_error,
    parse_json,
    parse_json5,
    parse_lines,
)
from ._jsonpath import compile_jsonpath
from ._toolmethod import DeferredToolMethods, ToolMethod

if TYPE_CHECKING:
    from ..stores._spool import SpoolReader

__all__ = ["JSON_MAX_BYTES", "JsonFormat", "SpooledJsonArtifact", "compile_jsonpath"]

JsonFormat = Literal["json", "jsonl", "ndjson", "json5"]
_FORMATS: frozenset[str] = frozenset(get_args(JsonFormat))
_LINES = ("jsonl", "ndjson")
_NOT_PARSED = object()

JSON_MAX_BYTES = 1 << 20
"""The largest body (1 MiB) parsed whole by default: a JSON document, or JSON Lines whose
records are kept between queries. Larger JSON Lines bodies are streamed by every query, each
line at most this long.

Why so small: a query runs in a worker thread, but the stdlib's parser holds the interpreter
lock until the whole value is built, so while it parses, every other turn on the event loop
waits. The wait grows faster than the size (the garbage collector walks the growing document
again and again): ``python -m bench.json_stall`` prints it per size beside this bound. Raise
``json_max_bytes`` on a subclass where one turn at a time runs (a script, a CLI)."""


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


def _too_large(size: int, limit: int, what: str) -> ToolDownstreamError:
    return ToolDownstreamError(
        f"the artifact is too large to {what} ({size:,} bytes; at most {limit:,} are parsed "
        "whole): read it as text with artifact_grep or artifact_cat",
        line=None,
        format="json",
    )


class SpooledJsonArtifact(SpooledArtifact):
    """A spooled result holding JSON (``json``), JSON Lines (``jsonl``/``ndjson``) or JSON5.

    ``format`` may be given; when None (the default, or the class's ``json_format``), it is
    inferred on first use, in the seeds' order: the whole body as strict JSON, else JSON Lines
    (every non-blank line parses), else JSON5; an empty body cannot be inferred and says so.
    Subclass and set ``json_format`` to fix the format for a tool's ``artifact_constructor``.

    Queries read *records*: the records of JSON Lines, or the one root of a single document.
    JSON5 is only parsed up to ``json5_max_bytes``, a whole document up to ``json_max_bytes``;
    larger JSON Lines bodies are streamed by every query, never held whole.
    """

    __slots__ = ("_document", "_error", "_format")

    json_format: ClassVar[JsonFormat | None] = None
    """The format instances use when none is given; None means inferred."""

    json5_max_bytes: ClassVar[int] = JSON5_MAX_BYTES
    """The largest body parsed as JSON5 (a subclass may raise it, at the cost of slow parses)."""

    json_max_bytes: ClassVar[int] = JSON_MAX_BYTES
    """The largest body parsed whole (see `JSON_MAX_BYTES`)."""

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
        """The format of the body (inferring it may parse the document).

        Raises:
            ToolDownstreamError: the format cannot be inferred (empty or unparsable body).
        """
        fmt = self._format
        if fmt is None:
            if self._error is not None:
                raise self._error.with_traceback(None)
            try:
                if self.byte_length() <= self.json_max_bytes:
                    self.document()
                else:
                    self._format = self._infer_large()
            except ToolDownstreamError as exc:
                self._error = exc
                raise
            fmt = self._format
            assert fmt is not None  # set by document() or _infer_large()
        return fmt

    def _streamed(self) -> bool:
        return self._format in _LINES and self.byte_length() > self.json_max_bytes

    def _infer_large(self) -> str:
        """Infer the format of a body too large to parse whole: JSON Lines or nothing.

        Whole JSON and JSON5 are out of reach at this size, so the body is JSON Lines when its
        first non-blank line parses (a later line that does not is reported by the query that
        reads it, naming the line).
        """
        size = self.byte_length()
        for index, line in enumerate(self.lines()):
            if not line or line.isspace():
                continue
            if len(line) > self.json_max_bytes:
                raise _too_large(size, self.json_max_bytes, "parse as one JSON document")
            try:
                json.loads(line)
            except (ValueError, RecursionError):
                raise _too_large(
                    size,
                    self.json_max_bytes,
                    f"parse as one JSON document, and its first line ({index}) is not JSON, so "
                    "it is not JSON Lines",
                ) from None
            return "jsonl"
        raise ToolDownstreamError(
            "the artifact is blank: its JSON format (json, jsonl or json5) cannot be inferred",
            line=None,
            format=None,
        )

    def document(self) -> Any:
        """Return the parsed document (JSON Lines: the list of records), parsing it once.

        Raises:
            ToolDownstreamError: the body does not parse (the message names the line), or is
                too large to parse whole (see ``json_max_bytes`` and ``json5_max_bytes``).
        """
        document = self._document
        if document is not _NOT_PARSED:
            return document
        if self._error is not None:
            raise self._error.with_traceback(None)
        size = self.byte_length()
        if size > self.json_max_bytes and self._format != "json5":
            if self._format in _LINES:
                raise _too_large(size, self.json_max_bytes, "hold as a list of records")
            raise _too_large(size, self.json_max_bytes, "parse as one JSON document")
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
        if fmt in _LINES:
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

    def iter_records(self) -> Iterator[Any]:
        """Yield the records: each JSON Lines value, or the single document's root.

        Large JSON Lines bodies are parsed line by line as the records are read.

        Raises:
            ToolDownstreamError: the body does not parse (naming the line).
        """
        fmt = self.format
        if self._streamed():
            return iter_records(self.lines(), fmt, self.json_max_bytes)
        document = self.document()
        return iter(document) if fmt in _LINES else iter((document,))

    def json_type(self) -> str:
        """Return the format: ``json``, ``jsonl``, ``json5`` (``ndjson`` only when given).

        The JSON type of the root is `json_root_type`.
        """
        return self.format

    def json_root_type(self) -> str:
        """Return the JSON type of the root: object, array, string, number, boolean or null.

        JSON Lines count as an array (of their records).
        """
        if self.format in _LINES:
            return "array"
        return _json_type(self.document())

    def json_keys(self) -> list[str]:
        """Return the keys of an object root, or the union of the keys of the object items.

        Items are an array root's items or the records of JSON Lines, in first-seen order.

        Raises:
            InvalidToolArgsError: a single document that is neither an object nor an array.
        """
        if self.format in _LINES:
            items: Any = self.iter_records()
        else:
            document = self.document()
            if isinstance(document, dict):
                return [str(key) for key in document]
            if not isinstance(document, list):
                raise InvalidToolArgsError(
                    f"json_keys needs an object or an array; the document is a "
                    f"{_json_type(document)}"
                )
            items = document
        seen: dict[str, None] = {}
        for item in items:
            if isinstance(item, dict):
                seen.update(dict.fromkeys(str(key) for key in item))
        return list(seen)

    def json_length(self) -> int:
        """Return the number of records (JSON Lines), 1 for a single document."""
        if self.format not in _LINES:
            self.document()
            return 1
        if self._streamed():
            return sum(1 for _ in self.iter_records())
        return len(self.document())

    def iter_get(self, path: str) -> Iterator[Any]:
        """Yield every value matching JSONPath ``path`` in each record, in order.

        Raises:
            InvalidToolArgsError: the path does not parse.
        """
        find = compile_jsonpath(path).find
        return (match.value for record in self.iter_records() for match in find(record))

    def json_get(self, path: str) -> list[Any]:
        """Return every value matching JSONPath ``path`` (JSON Lines: in each record, flattened).

        ``[]`` when nothing matches, never an error: a missing key reads ``(empty list)``.

        Raises:
            InvalidToolArgsError: the path does not parse.
        """
        return list(self.iter_get(path))

    def json_pluck(self, path: str) -> list[Any]:
        """The same as `json_get`, as the seeds define it.

        Raises:
            InvalidToolArgsError: the path does not parse.
        """
        return self.json_get(path)

    def iter_filter(self, path: str) -> Iterator[Any]:
        """Yield the records in which JSONPath ``path`` matches something.

        Raises:
            InvalidToolArgsError: the path does not parse.
        """
        find = compile_jsonpath(path).find
        return (record for record in self.iter_records() if find(record))

    def json_filter(self, path: str) -> list[Any]:
        """Return the records in which JSONPath ``path`` matches.

        A single document gives ``[root]`` or ``[]``.

        Raises:
            InvalidToolArgsError: the path does not parse.
        """
        return list(self.iter_filter(path))

    def record_range(
        self, start: int | None = None, end: int | None = None
    ) -> tuple[int, int | None]:
        """Return the ``(first, stop)`` record indexes `json_slice` reads (``stop`` None: all).

        Raises:
            InvalidToolArgsError: a bound is not an integer or None.
        """
        for name, bound in (("start", start), ("end", end)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise InvalidToolArgsError(f"{name} must be an integer or null", field=name)
        if (start is None or start >= 0) and (end is None or end >= 0):
            return start or 0, end
        first, stop, _ = slice(start, end).indices(self.json_length())
        return first, stop

    def iter_slice(self, first: int, stop: int | None) -> Iterator[Any]:
        """Yield records ``first`` to ``stop`` (a `record_range`); a single document: its root."""
        if self.format not in _LINES:
            return iter((self.document(),))
        if stop is not None and stop <= first:
            return iter(())
        return islice(self.iter_records(), first, stop)

    def json_slice(self, start: int | None = None, end: int | None = None) -> list[Any]:
        """Return records ``[start:end]`` (Python slice semantics); a single document: ``[root]``.

        Raises:
            InvalidToolArgsError: a bound is not an integer or None.
        """
        return list(self.iter_slice(*self.record_range(start, end)))

    def __repr__(self) -> str:
        """Return the class, format (if known), byte length and line count."""
        fmt = f" {self._format}" if self._format is not None else ""
        return f"<{type(self).__name__}{fmt} {self.byte_length()} bytes, {self.line_count()} lines>"


def _json_tool_methods() -> tuple[ToolMethod, ...]:
    from ._json_methods import JSON_TOOL_METHODS

    return JSON_TOOL_METHODS


# Built when first read, as SpooledArtifact's own (docs/architecture.md, "Import time"): a
# descriptor that reads as the tuple, so mypy's view of the ClassVar holds.
SpooledJsonArtifact.tool_methods = DeferredToolMethods(_json_tool_methods)  # type: ignore[assignment]

SpooledJsonArtifact.__module__ = "pipeline.artifacts"
