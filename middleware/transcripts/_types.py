"""The values a transcript is read into, and the codes of the problems found in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "E_ARGS",
    "E_JSON",
    "E_MESSAGE",
    "E_READ",
    "E_RESULT",
    "MODEL_ERROR_CODES",
    "N_SKIPPED",
    "RecordedCall",
    "RecordedStep",
    "RecordedTurn",
    "Transcript",
    "TranscriptFormat",
    "TranscriptIssue",
]

TranscriptFormat = Literal["openai", "openai-responses", "anthropic"]
"""The wire convention a transcript was recorded in (chat completions, Responses API items,
Anthropic messages)."""

E_READ: Final = "E_TRANSCRIPT_READ"
"""The file cannot be read or is not UTF-8 text."""
E_JSON: Final = "E_TRANSCRIPT_JSON"
"""The text is not valid JSON (or a JSON Lines line is not)."""
E_MESSAGE: Final = "E_TRANSCRIPT_MESSAGE"
"""A message does not have the shape of any convention understood."""
E_ARGS: Final = "E_TRANSCRIPT_ARGS"
"""Recorded tool-call arguments are not a JSON object: the model's error, replayed as such."""
E_RESULT: Final = "E_TRANSCRIPT_RESULT"
"""A tool result does not belong to any recorded tool call."""
N_SKIPPED: Final = "N_TRANSCRIPT_SKIPPED"
"""A note, not an error: an entry that is valid but not replayed (a hosted tool's item)."""

MODEL_ERROR_CODES: Final = frozenset({E_ARGS})
"""Codes of problems the model made (the recording is faithful): replayed, not fatal."""


@dataclass(frozen=True, slots=True)
class TranscriptIssue:
    """One problem (or note) found in a transcript, with where it is."""

    code: str
    """Stable code: ``E_TRANSCRIPT_READ``, ``_JSON``, ``_MESSAGE``, ``_ARGS``, ``_RESULT``, or
    ``N_TRANSCRIPT_SKIPPED`` for a note."""
    message: str
    """What is wrong, readable."""
    message_index: int | None = None
    """0-based index of the message concerned (``messages[i]``), when known."""
    line: int | None = None
    """1-based line in the file, when known."""
    column: int | None = None
    """1-based column in the file, when known."""

    @property
    def is_model_error(self) -> bool:
        """True for a mistake of the recorded model (bad argument JSON), not of the file."""
        return self.code in MODEL_ERROR_CODES

    @property
    def is_note(self) -> bool:
        """True for a note: nothing is wrong, something is just not replayed."""
        return self.code.startswith("N_")

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
    """0-based index of the (first) entry of the assistant message that proposed it."""
    line: int | None
    """1-based line of that entry in the file, when known."""
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
    replay_id: str = ""
    """The id the call is replayed under: ``id`` unless an earlier call of the transcript has
    the same id (providers reuse ids), then ``id~index``."""


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


@dataclass(frozen=True, slots=True, repr=False)
class Transcript:
    """A parsed transcript: its turns plus every issue found while reading it."""

    source: str
    """Where it was read from (a path, or a label for text and data)."""
    format: TranscriptFormat
    """The convention detected (Responses items win over Anthropic blocks over chat)."""
    system_prompt: str | None
    """The recorded system prompt, if any."""
    turns: tuple[RecordedTurn, ...]
    """The turns that could be read."""
    issues: tuple[TranscriptIssue, ...]
    """Every problem and note found, in file order."""
    message_count: int
    """How many entries were read (good or bad)."""

    def __repr__(self) -> str:
        """A short summary (a transcript can hold 100,000 calls)."""
        return (
            f"Transcript(source={self.source!r}, format={self.format!r}, "
            f"turns={len(self.turns)}, messages={self.message_count}, "
            f"issues={len(self.issues)})"
        )

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        """Every recorded call, in order."""
        return tuple(call for turn in self.turns for call in turn.calls)

    @property
    def errors(self) -> tuple[TranscriptIssue, ...]:
        """The problems of the file itself: not model errors, not notes."""
        return tuple(i for i in self.issues if not i.is_model_error and not i.is_note)

    @property
    def model_errors(self) -> tuple[TranscriptIssue, ...]:
        """The recorded model's own mistakes (bad argument JSON)."""
        return tuple(i for i in self.issues if i.is_model_error)

    @property
    def unreadable(self) -> bool:
        """True when nothing could be read (a missing, undecodable, empty or foreign file)."""
        return self.message_count == 0 and bool(self.errors)
