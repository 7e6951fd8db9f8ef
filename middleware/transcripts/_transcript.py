"""Reading recorded agent conversations: `read_transcript` and `parse_transcript`.

Three wire conventions are understood, in one JSON array, an object holding the list (under
``messages``, or ``input`` / ``output`` / ``items`` for Responses API items), or JSON Lines
(one entry per line):

* OpenAI chat completions: ``system``/``developer``, ``user``, ``assistant`` messages (with
  ``tool_calls``: ``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments
  as JSON text or an object) and ``tool`` messages (``tool_call_id``, or ``tool_call_ids``);
* OpenAI Responses API items: ``message`` items, ``function_call`` (``call_id``, ``name``,
  ``arguments``), ``function_call_output`` (``call_id``, ``output``) and ``reasoning``;
* Anthropic messages: ``user``/``assistant`` messages whose ``content`` is a string or a list of
  blocks, ``tool_use`` blocks (``id``, ``name``, ``input`` object), ``tool_result`` blocks
  (``tool_use_id``, ``content``, ``is_error``) and ``thinking`` blocks; a top-level ``system`` is
  the system prompt.

Each user message (other than one that only carries tool results) starts a turn; each assistant
message with tool calls becomes one scripted model step (consecutive assistant entries are one
message); an assistant message without tool calls is the turn's final answer. Bad input never
raises: every problem becomes a `TranscriptIssue` naming where it is (0-based message index,
1-based line and column), and the readable rest is kept, so a partly bad transcript still
replays its good part. JSON Lines files are read line by line, never whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Final

from ._json import CONTAINER_KEYS, Record, jsonl_records, read_records
from ._messages import TurnBuilder
from ._types import E_JSON, E_MESSAGE, E_READ, Transcript, TranscriptIssue

__all__ = ["parse_transcript", "read_transcript"]

_JSONL_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})


def read_transcript(
    source: str | os.PathLike[str] | Iterable[object] | Mapping[str, object],
) -> Transcript:
    """Read a transcript from a file path, or from already-decoded data.

    Never raises for bad input (see `Transcript.issues`).

    Args:
        source: A path (``.jsonl`` / ``.ndjson`` files are streamed as JSON Lines; other files
            are read as JSON, falling back to JSON Lines when the text holds one object per
            line), a list of messages or items, or an object holding them under ``messages``
            (``input``, ``output``, ``items``) with an optional ``system``. To parse JSON text,
            use `parse_transcript`.
    """
    if isinstance(source, str | os.PathLike):
        return _read_path(Path(source))
    if isinstance(source, Mapping):
        system = source.get("system", source.get("instructions"))
        found = next((v for k in CONTAINER_KEYS if isinstance(v := source.get(k), list)), None)
        if found is None:
            issue = TranscriptIssue(E_MESSAGE, 'expected a "messages" (or "input") list')
            return _empty("<data>", issue)
        return _build("<data>", _data_records(found), [], system)
    if isinstance(source, bytes | bytearray):
        raise TypeError("read_transcript takes a path or decoded data; use parse_transcript")
    return _build("<data>", _data_records(source), [], None)


def parse_transcript(text: str, *, source: str = "<text>", jsonl: bool | None = None) -> Transcript:
    """Parse transcript text (see the module docstring); never raises for bad input.

    Args:
        text: The whole file.
        source: A label for reports (usually the path).
        jsonl: True for JSON Lines, False for one JSON document, None to detect.
    """
    if not text.strip():
        return _empty(source, TranscriptIssue(E_JSON, "the transcript is empty", line=1, column=1))
    issues: list[TranscriptIssue] = []
    records, system = read_records(text, issues, jsonl=jsonl)
    return _build(source, records, issues, system)


def _data_records(values: Iterable[object]) -> Iterator[Record]:
    for index, value in enumerate(values):
        yield Record(value, index, None)


def _build(
    source: str, records: Iterable[Record], issues: list[TranscriptIssue], system: object
) -> Transcript:
    builder = TurnBuilder(issues, system)
    count = 0
    for record in records:
        builder.add(record)
        count = record.index + 1
    turns = builder.finish()
    issues.sort(key=lambda i: (-1 if i.message_index is None else i.message_index, i.line or 0))
    return Transcript(
        source=source,
        format=builder.format,
        system_prompt=builder.system,
        turns=turns,
        issues=tuple(issues),
        message_count=count,
    )


def _read_path(path: Path) -> Transcript:
    source = str(path)
    if path.suffix.lower() in _JSONL_SUFFIXES:
        try:
            handle = path.open("rb")
        except OSError as exc:
            return _empty(source, _cannot_read(source, exc))
        with handle:
            issues: list[TranscriptIssue] = []
            transcript = _build(source, jsonl_records(_lines(handle, issues), issues), issues, None)
        if transcript.message_count == 0 and not issues:
            return _empty(source, TranscriptIssue(E_JSON, "the transcript is empty", line=1))
        return transcript
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return _empty(source, _cannot_read(source, exc))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        issue = TranscriptIssue(
            E_READ, f"not UTF-8 text (byte {exc.start}: {exc.reason})", line=line, column=column
        )
        return _empty(source, issue)
    del raw
    return parse_transcript(text, source=source, jsonl=None)


def _lines(handle: IO[bytes], issues: list[TranscriptIssue]) -> Iterator[tuple[int, str]]:
    """Decode a JSON Lines file line by line; an undecodable line becomes an issue."""
    for lineno, raw in enumerate(handle, start=1):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        raw = raw.rstrip(b"\r\n")
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            issues.append(
                TranscriptIssue(
                    E_READ,
                    f"not UTF-8 text (byte {exc.start} of the line: {exc.reason})",
                    line=lineno,
                    column=exc.start + 1,
                )
            )


def _cannot_read(source: str, exc: OSError) -> TranscriptIssue:
    return TranscriptIssue(E_READ, f"cannot read {source}: {exc.strerror or exc}")


def _empty(source: str, issue: TranscriptIssue) -> Transcript:
    return Transcript(source, "openai", None, (), (issue,), 0)
