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

from pathlib import Path
from typing import Final

from ._replay_json import read_records
from ._replay_messages import TurnBuilder
from ._replay_types import E_JSON, E_READ, Transcript, TranscriptFormat, TranscriptIssue

__all__ = ["parse_transcript", "read_transcript"]

_JSONL_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})


def read_transcript(path: str | Path) -> Transcript:
    """Read and parse a transcript file; never raises for bad input (see `Transcript.issues`).

    ``.jsonl`` and ``.ndjson`` files are read as JSON Lines; other files as JSON, falling back to
    JSON Lines when the text holds one JSON object per line.
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
    if not text.strip():
        issues.append(TranscriptIssue(E_JSON, "the transcript is empty", line=1, column=1))
        return Transcript(source, "openai", None, (), tuple(issues), 0)
    records, system = read_records(text, issues, jsonl=jsonl)
    builder = TurnBuilder(issues, system)
    for record in records:
        builder.add(record)
    issues.sort(key=lambda i: (-1 if i.message_index is None else i.message_index, i.line or 0))
    fmt: TranscriptFormat = "anthropic" if builder.anthropic else "openai"
    return Transcript(
        source=source,
        format=fmt,
        system_prompt=builder.system,
        turns=builder.finish(),
        issues=tuple(issues),
        message_count=records[-1].index + 1 if records else 0,
    )


def _empty(source: str, issue: TranscriptIssue) -> Transcript:
    return Transcript(source, "openai", None, (), (issue,), 0)
