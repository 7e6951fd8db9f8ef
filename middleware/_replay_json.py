"""Reading a transcript file's JSON (or JSON Lines) into positioned records.

A JSON array is decoded element by element, so a truncated or broken file keeps every message
before the error, and the error names its line and column. JSON Lines files keep every good line.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Final

from ._replay_types import E_JSON, E_MESSAGE, TranscriptIssue

__all__ = ["Record", "read_records"]

_WS: Final = re.compile(r"[ \t\n\r]*")


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
) -> tuple[list[Record], object]:
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
        return _read_jsonl(text, issues), None
    records, system, looks_jsonl = _read_json(text, issues, allow_jsonl=jsonl is None)
    if looks_jsonl:
        return _read_jsonl(text, issues), None
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


def _read_jsonl(text: str, issues: list[TranscriptIssue]) -> list[Record]:
    records: list[Record] = []
    index = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
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
            records.append(Record(value, index, lineno))
        index += 1
    return records


def _read_json(
    text: str, issues: list[TranscriptIssue], *, allow_jsonl: bool
) -> tuple[list[Record], object, bool]:
    """Return (records, raw system value, looks-like-JSON-Lines)."""
    start = _WS.match(text, 0)
    pos = start.end() if start else 0
    if text.startswith("[", pos):
        return _walk_array(text, pos, issues), None, False
    lines = [line.lstrip() for line in text.splitlines() if line.strip()]
    if allow_jsonl and len(lines) > 1 and all(line.startswith("{") for line in lines):
        return [], None, True
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if allow_jsonl and exc.msg == "Extra data":
            return [], None, True
        issues.append(_json_issue(exc, "invalid JSON", None))
        return [], None, False
    if isinstance(value, dict) and "messages" in value:
        messages = value["messages"]
        system = value.get("system")
        if not isinstance(messages, list):
            issues.append(TranscriptIssue(E_MESSAGE, '"messages" must be a JSON array'))
            return [], system, False
        return [Record(m, i, None) for i, m in enumerate(messages)], system, False
    if isinstance(value, dict) and "role" in value:
        return [Record(value, 0, 1)], None, False
    issues.append(
        TranscriptIssue(
            E_MESSAGE,
            'expected a JSON array of messages, an object with a "messages" array, or JSON Lines',
            line=1,
            column=1,
        )
    )
    return [], None, False


def _walk_array(text: str, pos: int, issues: list[TranscriptIssue]) -> list[Record]:
    """Decode a JSON array element by element, keeping every element before an error."""
    decoder = json.JSONDecoder()
    lines = _Lines(text)
    records: list[Record] = []

    def skip(at: int) -> int:
        match = _WS.match(text, at)
        return match.end() if match else at

    def stop(at: int, message: str) -> list[Record]:
        line, column = lines.at(at)
        index = len(records)
        issues.append(
            TranscriptIssue(E_JSON, message, message_index=index, line=line, column=column)
        )
        return records

    pos = skip(pos + 1)
    if text.startswith("]", pos):
        pos = skip(pos + 1)
        return records if pos == len(text) else stop(pos, "extra data after the array")
    while True:
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            issue = _json_issue(exc, "invalid JSON", len(records))
            if not text.rstrip().endswith("]"):
                issue = replace(
                    issue,
                    message=f"{issue.message} (the file ends before the array "
                    "of messages is closed: truncated?)",
                )
            issues.append(issue)
            return records
        records.append(Record(value, len(records), lines.at(pos)[0]))
        pos = skip(end)
        if text.startswith(",", pos):
            pos = skip(pos + 1)
            continue
        if text.startswith("]", pos):
            pos = skip(pos + 1)
            return records if pos == len(text) else stop(pos, "extra data after the array")
        if pos >= len(text):
            return stop(pos, "unexpected end of file: the array of messages is not closed")
        return stop(pos, "expected ',' or ']' after a message")
