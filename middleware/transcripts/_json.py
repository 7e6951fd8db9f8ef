"""Reading a transcript file's JSON (or JSON Lines) into positioned records.

A JSON array is decoded element by element, so a truncated or broken file keeps every message
before the error, and the error names its line and column. JSON Lines files keep every good line.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Final

from ._types import E_JSON, E_MESSAGE, TranscriptIssue

__all__ = ["CONTAINER_KEYS", "Record", "jsonl_records", "read_records"]

CONTAINER_KEYS: Final = ("messages", "input", "output", "items")
"""Keys of a top-level object that hold the list of messages (or Responses API items)."""

_WS: Final = re.compile(r"[ \t\n\r]*")
_TOO_DEEP: Final = "invalid JSON: a value is nested too deeply to read"
_NOT_A_TRANSCRIPT: Final = (
    'expected a JSON array of messages, an object with a "messages" (or Responses API "input" '
    '/ "output") array, or JSON Lines'
)


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded message with where it came from."""

    value: object
    """The decoded JSON value (not yet checked to be a message)."""
    index: int
    """0-based message index (bad JSON Lines lines count too)."""
    line: int | None
    """1-based line where the message starts, when known."""


def read_records(
    text: str, issues: list[TranscriptIssue], *, jsonl: bool | None
) -> tuple[Iterable[Record], object]:
    """Decode ``text`` into records; append problems to ``issues``.

    Args:
        text: The whole file (not blank).
        issues: Where problems are appended.
        jsonl: True for JSON Lines, False for one JSON document, None to detect.

    Returns:
        The records and the raw top-level ``system`` value of a ``{"messages": ...}`` object
        (None otherwise).
    """
    if jsonl:
        return jsonl_records(enumerate(text.splitlines(), start=1), issues), None
    records, system, looks_jsonl = _read_json(text, issues, allow_jsonl=jsonl is None)
    if looks_jsonl:
        return jsonl_records(enumerate(text.splitlines(), start=1), issues), None
    return records, system


class _Lines:
    """Map a character offset to a 1-based (line, column)."""

    __slots__ = ("_starts",)

    def __init__(self, text: str) -> None:
        self._starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def at(self, pos: int) -> tuple[int, int]:
        line = bisect_right(self._starts, pos)
        return line, pos - self._starts[line - 1] + 1


def _json_issue(exc: json.JSONDecodeError, what: str, index: int | None) -> TranscriptIssue:
    return TranscriptIssue(
        E_JSON,
        f"{what}: {exc.msg}: line {exc.lineno} column {exc.colno}",
        message_index=index,
        line=exc.lineno,
        column=exc.colno,
    )


def jsonl_records(
    lines: Iterable[tuple[int, str]], issues: list[TranscriptIssue]
) -> Iterator[Record]:
    """Decode JSON Lines one line at a time (``(lineno, line)`` pairs), lazily.

    A file is never held whole. Bad lines become issues and count as messages.
    """
    index = 0
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except RecursionError:
            issues.append(
                TranscriptIssue(E_JSON, _TOO_DEEP, message_index=index, line=lineno, column=1)
            )
        except json.JSONDecodeError as exc:
            issues.append(
                TranscriptIssue(
                    E_JSON,
                    f"invalid JSON: {exc.msg}: column {exc.colno}",
                    message_index=index,
                    line=lineno,
                    column=exc.colno,
                )
            )
        else:
            yield Record(value, index, lineno)
        index += 1


def _read_json(
    text: str, issues: list[TranscriptIssue], *, allow_jsonl: bool
) -> tuple[list[Record], object, bool]:
    """Return (records, raw system value, looks-like-JSON-Lines)."""
    walker = _Walker(text, issues)
    pos = walker.skip(0)
    if text.startswith("[", pos):
        records, end = walker.array(pos)
        if end is not None:
            walker.expect_end(end, len(records))
        return records, None, False
    lines = [line.lstrip() for line in text.splitlines() if line.strip()]
    if allow_jsonl and len(lines) > 1 and all(line.startswith("{") for line in lines):
        return [], None, True
    if text.startswith("{", pos):
        return walker.document(pos, allow_jsonl=allow_jsonl)
    walker.stop(pos, _NOT_A_TRANSCRIPT, None, E_MESSAGE)
    return [], None, False


class _Walker:
    """Decodes a JSON document value by value, so an error keeps what came before it."""

    __slots__ = ("_decoder", "_issues", "_lines", "_text")

    def __init__(self, text: str, issues: list[TranscriptIssue]) -> None:
        self._text = text
        self._issues = issues
        self._lines = _Lines(text)
        self._decoder = json.JSONDecoder()

    def skip(self, pos: int) -> int:
        match = _WS.match(self._text, pos)
        return match.end() if match else pos

    def stop(self, pos: int, message: str, index: int | None, code: str = E_JSON) -> None:
        line, column = self._lines.at(pos)
        self._issues.append(
            TranscriptIssue(code, message, message_index=index, line=line, column=column)
        )

    def value(self, pos: int, index: int | None, closer: str) -> tuple[object, int | None]:
        """Decode one value at ``pos``; on error record it (noting a truncation) and give None."""
        try:
            return self._decoder.raw_decode(self._text, pos)
        except RecursionError:
            self.stop(pos, _TOO_DEEP, index)
            return None, None
        except json.JSONDecodeError as exc:
            issue = _json_issue(exc, "invalid JSON", index)
            if not self._text.rstrip().endswith(closer):
                issue = replace(
                    issue,
                    message=f"{issue.message} (the file ends before the array of messages is "
                    "closed: truncated?)",
                )
            self._issues.append(issue)
            return None, None

    def array(self, pos: int) -> tuple[list[Record], int | None]:
        """Decode the array at ``pos`` message by message; the end, or None after an error."""
        text = self._text
        records: list[Record] = []
        pos = self.skip(pos + 1)
        if text.startswith("]", pos):
            return records, pos + 1
        while True:
            index = len(records)
            value, end = self.value(pos, index, "]" if text.lstrip().startswith("[") else "}")
            if end is None:
                return records, None
            records.append(Record(value, index, self._lines.at(pos)[0]))
            pos = self.skip(end)
            if text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif text.startswith("]", pos):
                return records, pos + 1
            else:
                problem = (
                    "the array of messages is not closed"
                    if pos >= len(text)
                    else ("expected ',' or ']' after a message")
                )
                self.stop(pos, problem, index + 1)
                return records, None

    def expect_end(self, pos: int, index: int) -> None:
        pos = self.skip(pos)
        if pos < len(self._text):
            self.stop(pos, "extra data after the transcript", index)

    def document(self, pos: int, *, allow_jsonl: bool) -> tuple[list[Record], object, bool]:
        """An object: ``{"messages": [...], "system": ...}`` or a single message."""
        text = self._text
        fields: dict[str, object] = {}
        records: list[Record] | None = None
        start = pos
        pos = self.skip(pos + 1)
        while not text.startswith("}", pos):
            key, end = self.value(pos, None, "}")
            if end is None:
                return records or [], _system(fields), False
            pos = self.skip(end)
            if not isinstance(key, str) or not text.startswith(":", pos):
                self.stop(pos, "expected an object key and ':'", None)
                return records or [], _system(fields), False
            pos = self.skip(pos + 1)
            if key in CONTAINER_KEYS and records is None and text.startswith("[", pos):
                records, end = self.array(pos)
            else:
                fields[key], end = self.value(pos, None, "}")
            if end is None:
                return records or [], _system(fields), False
            pos = self.skip(end)
            if text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif not text.startswith("}", pos):
                self.stop(pos, "expected ',' or '}' in the top-level object", None)
                return records or [], _system(fields), False
        pos = self.skip(pos + 1)
        if pos < len(text) and allow_jsonl and text.startswith("{", pos):
            return [], None, True  # one object after another: JSON Lines
        if records is None and ("role" in fields or "type" in fields):
            records = [Record(fields, 0, self._lines.at(start)[0])]
        elif records is None:
            message = (
                '"messages" must be a JSON array' if "messages" in fields else _NOT_A_TRANSCRIPT
            )
            self.stop(start, message, None, E_MESSAGE)
            return [], _system(fields), False
        self.expect_end(pos, len(records))
        return records, _system(fields), False


def _system(fields: dict[str, object]) -> object:
    """The system prompt of a top-level object (Responses API requests call it instructions)."""
    system = fields.get("system")
    return fields.get("instructions") if system is None else system
