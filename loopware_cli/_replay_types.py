"""The values ``loopware replay`` reads a transcript into, and its issue codes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "E_ARGS",
    "E_JSON",
    "E_MESSAGE",
    "E_READ",
    "E_RESULT",
    "RecordedCall",
    "RecordedStep",
    "RecordedTurn",
    "Transcript",
    "TranscriptFormat",
    "TranscriptIssue",
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
