"""Parsing a spooled body as JSON, JSON Lines or JSON5, and inferring which one it is.

Content that does not parse raises `ToolDownstreamError` naming the line (``.line``, 0-based)
and the format.

JSON5 is parsed by the ``json5`` package, a pure-Python parser some thousand times slower than
``json`` (about 12 s per MiB for ordinary records, up to about 40 s per MiB for arrays of
one-digit numbers) that cannot be interrupted. So JSON5 is only tried for bodies up to a size
bound (`JSON5_MAX_BYTES` by default): the bound is what limits its time, to about 3 s for
records and 10 s at worst. Larger bodies get an error saying so and stay readable as text
(``artifact_grep``, ``artifact_cat``). Forged query tools run in a worker thread, so even a slow
parse never blocks the event loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import ToolDownstreamError

__all__ = [
    "JSON5_MAX_BYTES",
    "infer_json",
    "iter_records",
    "json5_size_error",
    "parse_json",
    "parse_json5",
    "parse_lines",
]

JSON5_MAX_BYTES = 256 << 10
"""The largest body (256 KiB) parsed as JSON5 by default (see the module docstring)."""

_JSON5_LINE = re.compile(r"<string>:(\d+)")


def _content_error(
    fmt: str, line: int | None, detail: str, cause: BaseException
) -> ToolDownstreamError:
    where = f" at line {line}" if line is not None else ""
    error = ToolDownstreamError(
        f"the artifact is not valid {fmt}{where}: {detail}", line=line, format=fmt
    )
    error.__cause__ = cause
    return error


def _json_failure(
    exc: BaseException, fmt: str = "json", line_base: int = 0, note: str = ""
) -> ToolDownstreamError:
    """Translate a ``json`` error; ``line_base`` is the line the parsed text starts on."""
    line: int | None
    if isinstance(exc, json.JSONDecodeError):
        line, detail = line_base + exc.lineno - 1, f"{exc.msg} (column {exc.colno})"
    else:
        line = line_base if fmt != "json" else None
        detail = str(exc) or type(exc).__name__
    return _content_error(fmt, line, detail + note, exc)


def parse_json(text: str) -> Any:
    """Parse ``text`` as one JSON document.

    Raises:
        ToolDownstreamError: it is not JSON.
    """
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _json_failure(exc) from exc


def iter_records(
    lines: Iterable[str], fmt: str = "jsonl", max_line: int | None = None
) -> Iterator[Any]:
    """Yield each non-blank line parsed as a JSON value (JSON Lines), streaming.

    ``max_line``: the longest line (in characters) parsed; a longer one is refused, for the
    reason `JSON_MAX_BYTES` gives (``_json_artifact.py``).

    Raises:
        ToolDownstreamError: a line is not JSON, or is longer than ``max_line``; ``.line`` is
            its index.
    """
    loads = json.loads
    for index, line in enumerate(lines):
        if not line or line.isspace():
            continue
        if max_line is not None and len(line) > max_line:
            raise ToolDownstreamError(
                f"line {index} of the artifact is too large to parse ({len(line):,} characters; "
                f"at most {max_line:,} are parsed at once): read it as text with artifact_grep "
                "or artifact_cat",
                line=index,
                format=fmt,
            )
        try:
            record = loads(line)
        except (ValueError, RecursionError) as exc:
            raise _json_failure(exc, fmt, index) from exc
        yield record


def parse_lines(lines: Iterable[str], fmt: str = "jsonl") -> list[Any]:
    """Parse each non-blank line as a JSON value (JSON Lines); return the records.

    Raises:
        ToolDownstreamError: a line is not JSON; ``.line`` is its index.
    """
    return list(iter_records(lines, fmt))


def json5_size_error(size: int, limit: int) -> str | None:
    """Return why a body of ``size`` bytes is too large for JSON5, or None when it is not."""
    if size <= limit:
        return None
    return (
        f"the artifact is too large for JSON5 ({size:,} bytes; the JSON5 parser takes at most "
        f"{limit:,}): read it as text with artifact_grep or artifact_cat"
    )


def parse_json5(text: str) -> Any:
    """Parse ``text`` as JSON5 (check its size with `json5_size_error` first).

    Raises:
        ToolDownstreamError: it is not JSON5.
    """
    import json5  # an optional parser, imported on first use

    try:
        return json5.loads(text)
    except (ValueError, RecursionError) as exc:
        message = str(exc) or type(exc).__name__
        found = _JSON5_LINE.search(message)
        line = int(found.group(1)) - 1 if found else None
        detail = _JSON5_LINE.sub("", message).strip() or message
        raise _content_error("json5", line, detail, exc) from exc


def infer_json(text: str, size: int, json5_limit: int) -> tuple[str, Any]:
    """Return ``(format, document)``: ``text`` as JSON, else JSON Lines, else JSON5.

    JSON5 is tried only when ``size`` (bytes) is within ``json5_limit``.

    Raises:
        ToolDownstreamError: no format fits (the error of the likeliest one), or the body is
            empty.
    """
    if not text.strip():
        raise ToolDownstreamError(
            "the artifact is empty: its JSON format (json, jsonl or json5) cannot be inferred",
            line=None,
            format=None,
        )
    try:
        return "json", json.loads(text)
    except (ValueError, RecursionError) as exc:
        json_error: BaseException = exc
    lines = text.split("\n")
    lines_error: ToolDownstreamError | None = None
    if text.strip().count("\n"):
        try:
            return "jsonl", parse_lines(lines)
        except ToolDownstreamError as exc:
            lines_error = exc
    too_large = json5_size_error(size, json5_limit)
    if too_large is None:
        try:
            return "json5", parse_json5(text)
        except ToolDownstreamError:
            pass
    first = next(i for i, line in enumerate(lines) if line.strip())
    if lines_error is not None and (lines_error.line or 0) > first:
        # Its first line parsed alone: the body is meant as JSON Lines; report that line.
        raise lines_error
    # When JSON5 was not tried, say so, or the model would take the body for broken JSON5.
    note = "" if too_large is None else f"; JSON5 was not tried: {too_large}"
    raise _json_failure(json_error, note=note) from json_error
