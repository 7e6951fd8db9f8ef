"""Reading recorded agent conversations for ``loopware replay``.

Two wire conventions are understood, in one JSON array, a ``{"messages": [...]}`` object or JSON
Lines (one message per line):

* OpenAI chat completions: ``system``/``developer``, ``user``, ``assistant`` messages (with
  ``tool_calls``: ``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments
  as JSON text) and ``tool`` messages (``tool_call_id``, ``content``);
* Anthropic messages: ``user``/``assistant`` messages whose ``content`` is a string or a list of
  blocks, ``tool_use`` blocks (``id``, ``name``, ``input`` object) and ``tool_result`` blocks
  (``tool_use_id``, ``content``, ``is_error``); a top-level ``system`` is the system prompt.

Each user message (other than one that only carries tool results) starts a turn; each assistant
message with tool calls becomes one scripted model step; an assistant message without tool calls
is the turn's final answer. Bad input never raises: every problem becomes a `TranscriptIssue`
naming where it is (0-based message index, 1-based line and column), and the readable rest of
the file is kept, so a partly bad transcript still replays its good part.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

__all__ = [
    "RecordedCall",
    "RecordedStep",
    "RecordedTurn",
    "Transcript",
    "TranscriptFormat",
    "TranscriptIssue",
    "parse_transcript",
    "read_transcript",
]

TranscriptFormat = Literal["openai", "anthropic"]
"""The wire convention a transcript was recorded in."""

E_READ: Final = "E_TRANSCRIPT_READ"
"""The file cannot be read or is not UTF-8 text."""
E_JSON: Final = "E_TRANSCRIPT_JSON"
"""The text is not valid JSON (or a JSON Lines line is not)."""
E_MESSAGE: Final = "E_TRANSCRIPT_MESSAGE"
"""A message does not have the shape of either convention."""
E_ARGS: Final = "E_TRANSCRIPT_ARGS"
"""Recorded tool-call arguments are not a JSON object."""
E_RESULT: Final = "E_TRANSCRIPT_RESULT"
"""A tool result does not belong to any recorded tool call."""

_JSONL_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})
_WS: Final = re.compile(r"[ \t\n\r]*")
_ANTHROPIC_BLOCKS: Final = frozenset({"tool_use", "tool_result"})


@dataclass(frozen=True, slots=True)
class TranscriptIssue:
    """One problem found in a transcript, with where it is."""

    code: str
    """Stable code: ``E_TRANSCRIPT_READ``, ``_JSON``, ``_MESSAGE``, ``_ARGS`` or ``_RESULT``."""
    message: str
    """What is wrong, readable."""
    message_index: int | None = None
    """0-based index of the message concerned (``messages[i]``), when known."""
    line: int | None = None
    """1-based line in the file, when known."""
    column: int | None = None
    """1-based column in the file, when known."""

    def location(self) -> str:
        """Return ``line L, column C, messages[i]`` with the parts that are known."""
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.column is not None:
            parts.append(f"column {self.column}")
        if self.message_index is not None:
            parts.append(f"messages[{self.message_index}]")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """Return the issue as plain JSON data."""
        return {
            "code": self.code,
            "message": self.message,
            "message_index": self.message_index,
            "line": self.line,
            "column": self.column,
        }


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One tool call as the transcript recorded it."""

    index: int
    """0-based position among all recorded calls of the transcript."""
    turn: int
    """0-based index of the turn it belongs to."""
    message_index: int
    """0-based index of the assistant message that proposed it."""
    line: int | None
    """1-based line of that message in the file, when known."""
    id: str
    """The provider's call id (generated when the transcript had none)."""
    tool: str
    """The tool name the model called."""
    arguments: str
    """The arguments as JSON text, exactly as the provider sent them."""
    args_valid: bool
    """False when the arguments are not a JSON object (an `E_TRANSCRIPT_ARGS` issue)."""
    result: str | None
    """The recorded tool result text, or None when the transcript has none."""
    result_is_error: bool
    """True when the recorded result was flagged as an error (Anthropic ``is_error``)."""


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One assistant message that proposed tool calls: one scripted model step."""

    text: str | None
    """Assistant text sent along with the calls, if any."""
    calls: tuple[RecordedCall, ...]
    """The proposed calls, in order."""


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """One turn of the conversation: a user input, tool-calling steps, a final answer."""

    index: int
    """0-based turn index."""
    input: str
    """The user input that started it (empty for an assistant-initiated continuation)."""
    message_index: int | None
    """0-based index of the user message, or None for a continuation."""
    steps: tuple[RecordedStep, ...]
    """The tool-calling steps, in order."""
    answer: str | None
    """The final assistant text, or None when the recording stops before one."""

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        """Every recorded call of the turn, in order."""
        return tuple(call for step in self.steps for call in step.calls)


@dataclass(frozen=True, slots=True)
class Transcript:
    """A parsed transcript: its turns plus every issue found while reading it."""

    source: str
    """Where it was read from (a path, or a label for text)."""
    format: TranscriptFormat
    """The convention detected (``anthropic`` when tool_use/tool_result blocks occur)."""
    system_prompt: str | None
    """The recorded system prompt, if any."""
    turns: tuple[RecordedTurn, ...]
    """The turns that could be read."""
    issues: tuple[TranscriptIssue, ...]
    """Every problem found, in file order."""
    message_count: int
    """How many messages were read (good or bad)."""

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        """Every recorded call, in order."""
        return tuple(call for turn in self.turns for call in turn.calls)


@dataclass(frozen=True, slots=True)
class _Record:
    value: object
    index: int
    line: int | None


class _Lines:
    """Map a character offset to a 1-based (line, column)."""

    __slots__ = ("_starts",)

    def __init__(self, text: str) -> None:
        self._starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def at(self, pos: int) -> tuple[int, int]:
        line = bisect_right(self._starts, pos)
        return line, pos - self._starts[line - 1] + 1


def read_transcript(path: str | Path) -> Transcript:
    """Read and parse a transcript file; never raises for bad input (see `Transcript.issues`).

    ``.jsonl`` and ``.ndjson`` files are read as JSON Lines; other files as JSON, falling back to
    JSON Lines when the text holds several JSON values one after another.
    """
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return _empty(source, TranscriptIssue(E_READ, f"cannot read {source}: {reason}"))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        issue = TranscriptIssue(
            E_READ, f"not UTF-8 text (byte {exc.start}: {exc.reason})", line=line, column=column
        )
        return _empty(source, issue)
    jsonl = True if Path(path).suffix.lower() in _JSONL_SUFFIXES else None
    return parse_transcript(text, source=source, jsonl=jsonl)


def parse_transcript(text: str, *, source: str = "<text>", jsonl: bool | None = None) -> Transcript:
    """Parse transcript text (see the module docstring); never raises for bad input.

    Args:
        text: The whole file.
        source: A label for reports (usually the path).
        jsonl: True for JSON Lines, False for one JSON document, None to detect.
    """
    issues: list[TranscriptIssue] = []
    system: str | None = None
    if jsonl:
        records = _read_jsonl(text, issues)
    else:
        records, system, detected_jsonl = _read_json(text, issues, allow_jsonl=jsonl is None)
        if detected_jsonl:
            issues.clear()
            records = _read_jsonl(text, issues)
    if not text.strip():
        issues.append(TranscriptIssue(E_JSON, "the transcript is empty", line=1, column=1))
    builder = _Builder(issues, system)
    for record in records:
        builder.add(record)
    issues.sort(key=lambda i: (i.line or 0, i.message_index or 0))
    fmt: TranscriptFormat = "anthropic" if builder.anthropic else "openai"
    return Transcript(
        source=source,
        format=fmt,
        system_prompt=builder.system,
        turns=builder.finish(),
        issues=tuple(issues),
        message_count=len(records) + builder.extra_count,
    )


def _empty(source: str, issue: TranscriptIssue) -> Transcript:
    return Transcript(source, "openai", None, (), (issue,), 0)


# -- JSON and JSON Lines ------------------------------------------------------------------------
def _json_issue(exc: json.JSONDecodeError, what: str, index: int | None) -> TranscriptIssue:
    return TranscriptIssue(
        E_JSON, f"{what}: {exc.msg}", message_index=index, line=exc.lineno, column=exc.colno
    )


def _read_jsonl(text: str, issues: list[TranscriptIssue]) -> list[_Record]:
    records: list[_Record] = []
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
                    f"invalid JSON: {exc.msg}",
                    message_index=index,
                    line=lineno,
                    column=exc.colno,
                )
            )
        else:
            records.append(_Record(value, index, lineno))
        index += 1
    return records


def _read_json(
    text: str, issues: list[TranscriptIssue], *, allow_jsonl: bool
) -> tuple[list[_Record], str | None, bool]:
    """Return (records, system prompt, looks-like-JSON-Lines)."""
    start = _WS.match(text, 0)
    pos = start.end() if start else 0
    if text.startswith("[", pos):
        return _walk_array(text, pos, issues), None, False
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if allow_jsonl and exc.msg == "Extra data":
            return [], None, True
        if text.strip():
            issues.append(_json_issue(exc, "invalid JSON", None))
        return [], None, False
    if isinstance(value, dict) and "messages" in value:
        messages = value["messages"]
        system = _text(value.get("system"))
        if not isinstance(messages, list):
            issues.append(TranscriptIssue(E_MESSAGE, '"messages" must be a JSON array'))
            return [], system, False
        return [_Record(m, i, None) for i, m in enumerate(messages)], system, False
    if isinstance(value, dict) and "role" in value:
        return [_Record(value, 0, 1)], None, False
    issues.append(
        TranscriptIssue(
            E_MESSAGE,
            "expected a JSON array of messages, an object with a \"messages\" array, "
            "or JSON Lines",
            line=1,
            column=1,
        )
    )
    return [], None, False


def _walk_array(text: str, pos: int, issues: list[TranscriptIssue]) -> list[_Record]:
    """Decode a JSON array element by element, keeping every element before an error."""
    decoder = json.JSONDecoder()
    lines = _Lines(text)
    records: list[_Record] = []

    def skip(at: int) -> int:
        match = _WS.match(text, at)
        return match.end() if match else at

    def stop(at: int, message: str) -> list[_Record]:
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
            where = "truncated message" if exc.pos >= len(text) else "invalid JSON"
            issues.append(_json_issue(exc, where, len(records)))
            return records
        records.append(_Record(value, len(records), lines.at(pos)[0]))
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


# -- message shapes -----------------------------------------------------------------------------
def _text(content: object) -> str | None:
    """The text of a content value: a string, or a list of text parts/blocks."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") in ("image", "image_url", "input_image"):
                    parts.append("[image]")
                elif part.get("type") == "tool_result":
                    continue
        return "\n".join(parts)
    return None


@dataclass(slots=True)
class _CallDraft:
    index: int
    turn: int
    message_index: int
    line: int | None
    id: str
    tool: str
    arguments: str
    args_valid: bool
    result: str | None = None
    result_is_error: bool = False

    def freeze(self) -> RecordedCall:
        return RecordedCall(
            index=self.index,
            turn=self.turn,
            message_index=self.message_index,
            line=self.line,
            id=self.id,
            tool=self.tool,
            arguments=self.arguments,
            args_valid=self.args_valid,
            result=self.result,
            result_is_error=self.result_is_error,
        )


@dataclass(slots=True)
class _TurnDraft:
    index: int
    input: str
    message_index: int | None
    steps: list[tuple[str | None, list[_CallDraft]]] = field(default_factory=list)
    answer: str | None = None
    answered: bool = False


class _Builder:
    """Folds records into turns, collecting issues."""

    __slots__ = ("anthropic", "calls", "extra_count", "issues", "pending", "system", "turns")

    def __init__(self, issues: list[TranscriptIssue], system: str | None) -> None:
        self.issues = issues
        self.system = system
        self.turns: list[_TurnDraft] = []
        self.calls: list[_CallDraft] = []
        self.pending: dict[str, _CallDraft] = {}
        self.anthropic = False
        self.extra_count = 0

    def issue(self, code: str, record: _Record, message: str) -> None:
        self.issues.append(
            TranscriptIssue(code, message, message_index=record.index, line=record.line)
        )

    def add(self, record: _Record) -> None:
        msg = record.value
        if not isinstance(msg, dict):
            self.issue(E_MESSAGE, record, f"a message must be a JSON object, not {_kind(msg)}")
            return
        role = msg.get("role")
        content = msg.get("content")
        if role in ("system", "developer"):
            if self.system is None:
                self.system = _text(content)
        elif role == "user":
            self._user(record, content)
        elif role == "assistant":
            self._assistant(record, msg, content)
        elif role == "tool":
            self._tool_message(record, msg)
        elif role == "function" or "function_call" in msg:
            self.issue(
                E_MESSAGE, record, "legacy function_call messages are not supported; use tool_calls"
            )
        else:
            self.issue(E_MESSAGE, record, f"unknown message role {role!r}")

    def _turn(self) -> _TurnDraft:
        if not self.turns or self.turns[-1].answered:
            self.turns.append(_TurnDraft(len(self.turns), "", None))
        return self.turns[-1]

    def _user(self, record: _Record, content: object) -> None:
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            self.anthropic = True
            for block in results:
                self._result(record, block.get("tool_use_id"), block.get("content"), block)
            return
        text = _text(content)
        if text is None:
            self.issue(E_MESSAGE, record, "user content must be a string or a list of parts")
            text = ""
        self.turns.append(_TurnDraft(len(self.turns), text, record.index))

    def _assistant(self, record: _Record, msg: dict[str, Any], content: object) -> None:
        turn = self._turn()
        calls: list[_CallDraft] = []
        raw_calls = msg.get("tool_calls")
        if raw_calls is not None:
            if isinstance(raw_calls, list):
                for k, raw in enumerate(raw_calls):
                    self._openai_call(record, turn, k, raw, calls)
            else:
                self.issue(E_MESSAGE, record, "tool_calls must be a JSON array")
        if isinstance(content, list):
            for k, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.anthropic = True
                    self._anthropic_call(record, turn, k, block, calls)
        elif content is not None and not isinstance(content, str):
            self.issue(E_MESSAGE, record, "assistant content must be a string, a list or null")
        text = _text(content)
        if calls or (raw_calls is not None and isinstance(raw_calls, list) and raw_calls):
            turn.steps.append((text or None, calls))
        else:
            turn.answer = text or ""
            turn.answered = True

    def _new_call(
        self, record: _Record, turn: _TurnDraft, call_id: object, tool: str, args: str, ok: bool
    ) -> _CallDraft:
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_m{record.index}_{len(self.calls)}"
        draft = _CallDraft(
            len(self.calls), turn.index, record.index, record.line, call_id, tool, args, ok
        )
        self.calls.append(draft)
        self.pending[call_id] = draft
        return draft

    def _openai_call(
        self, record: _Record, turn: _TurnDraft, k: int, raw: object, calls: list[_CallDraft]
    ) -> None:
        where = f"tool_calls[{k}]"
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(fn, dict):
            self.issue(E_MESSAGE, record, f"{where} must be an object with a \"function\" object")
            return
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            self.issue(E_MESSAGE, record, f"{where}.function.name must be a non-empty string")
            return
        arguments = fn.get("arguments", "")
        if isinstance(arguments, dict):  # some exports store the parsed object
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            self.issue(E_ARGS, record, f"{where} ({name}): arguments must be JSON text")
            arguments = json.dumps(arguments)
        ok = self._check_args(record, f"{where} ({name})", arguments)
        calls.append(self._new_call(record, turn, raw.get("id"), name, arguments, ok))

    def _anthropic_call(
        self,
        record: _Record,
        turn: _TurnDraft,
        k: int,
        block: dict[str, Any],
        calls: list[_CallDraft],
    ) -> None:
        where = f"content[{k}]"
        name = block.get("name")
        if not isinstance(name, str) or not name:
            self.issue(E_MESSAGE, record, f"{where}: tool_use needs a non-empty \"name\"")
            return
        raw_input = block.get("input", {})
        if isinstance(raw_input, str):
            arguments = raw_input
            ok = self._check_args(record, f"{where} ({name})", arguments)
        else:
            arguments = json.dumps(raw_input, ensure_ascii=False)
            ok = isinstance(raw_input, dict)
            if not ok:
                self.issue(
                    E_ARGS, record, f"{where} ({name}): input must be a JSON object, "
                    f"not {_kind(raw_input)}"
                )
        calls.append(self._new_call(record, turn, block.get("id"), name, arguments, ok))

    def _check_args(self, record: _Record, where: str, arguments: str) -> bool:
        if not arguments.strip():
            return True  # providers send "" for a call without arguments
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError as exc:
            self.issue(
                E_ARGS,
                record,
                f"{where}: arguments are not valid JSON ({exc.msg} at character {exc.pos} of "
                f"{arguments[:60]!r})",
            )
            return False
        if not isinstance(value, dict):
            self.issue(E_ARGS, record, f"{where}: arguments must be a JSON object, not {_kind(value)}")
            return False
        return True

    def _tool_message(self, record: _Record, msg: dict[str, Any]) -> None:
        self._result(record, msg.get("tool_call_id"), msg.get("content"), msg)

    def _result(
        self, record: _Record, call_id: object, content: object, source: Mapping[str, Any]
    ) -> None:
        if not isinstance(call_id, str) or not call_id:
            self.issue(E_RESULT, record, "a tool result needs the id of its tool call")
            return
        draft = self.pending.pop(call_id, None)
        if draft is None:
            self.issue(E_RESULT, record, f"tool result for unknown call id {call_id!r}")
            return
        text = _text(content)
        draft.result = text if text is not None else json.dumps(content)
        draft.result_is_error = source.get("is_error") is True

    def finish(self) -> tuple[RecordedTurn, ...]:
        return tuple(
            RecordedTurn(
                index=t.index,
                input=t.input,
                message_index=t.message_index,
                steps=tuple(
                    RecordedStep(text, tuple(c.freeze() for c in calls)) for text, calls in t.steps
                ),
                answer=t.answer if t.answered else None,
            )
            for t in self.turns
        )


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
