"""Events emitted during a turn.

Every event is a frozen, slotted dataclass carrying the ``turn_id`` of the turn that emitted it
and a ``timestamp`` (an aware UTC datetime). Subscribe with ``runner.on(EventType, handler)`` or
``runner.on_any(handler)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._gate import Gate
    from .calls._decision import ToolDecision
    from .calls._toolcall import ToolCall
    from .errors import LoopError
    from .models._message import Message

__all__ = [
    "DispatchEnd",
    "DispatchStart",
    "ErrorReported",
    "Event",
    "GateClosed",
    "GateOpened",
    "IterationEnd",
    "IterationStart",
    "Log",
    "LogLevel",
    "MessageStored",
    "ModelTextDelta",
    "StageName",
    "ToolCallStored",
    "ToolDecided",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "TurnEnd",
    "TurnStart",
    "TurnStatus",
]

StageName = Literal[
    "turn_input", "dispatch_input", "dispatch_output", "turn_output", "tool_call", "executor"
]
"""Where an error was reported: one of the five stages, or the executor."""

TurnStatus = Literal["completed", "failed", "aborted"]
"""How a turn ended."""

LogLevel = Literal["debug", "info", "warning", "error"]
"""Severity of a `Log` event."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event."""

    turn_id: str
    """The turn that emitted the event."""
    timestamp: datetime = field(default_factory=_now)
    """When the event was created (aware, UTC)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStart(Event):
    """A turn began; emitted once, before the turn input stage."""

    input: str
    """The user input the turn was started with."""
    conversation_id: str | None = None
    """The conversation the turn belongs to, if any."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd(Event):
    """A turn ended; emitted exactly once for every `TurnStart`."""

    status: TurnStatus
    """How the turn ended."""
    duration_ms: float
    """Wall-clock duration of the turn in milliseconds."""
    error: LoopError | None = None
    """The error that failed the turn, if it failed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchStart(Event):
    """The dispatch (the model loop) began."""

    dispatch_id: str
    """Identifier of the dispatch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchEnd(Event):
    """The dispatch ended."""

    dispatch_id: str
    """Identifier of the dispatch."""
    status: Literal["ack", "nack", "aborted"]
    """How the dispatch ended."""
    iterations: int
    """How many iterations ran."""
    error: LoopError | None = None
    """The nack error, if the dispatch was nacked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationStart(Event):
    """An iteration of the dispatch loop began."""

    dispatch_id: str
    """Identifier of the dispatch."""
    iteration: int
    """0-based iteration number."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationEnd(Event):
    """An iteration of the dispatch loop ended."""

    dispatch_id: str
    """Identifier of the dispatch."""
    iteration: int
    """0-based iteration number."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTextDelta(Event):
    """A piece of the model's answer text, as it streams in (only while somebody listens)."""

    dispatch_id: str
    """Identifier of the dispatch."""
    iteration: int
    """The iteration whose model call is streaming."""
    text: str
    """The new text (append the deltas in order to get the answer so far)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStart(Event):
    """A tool handler is about to run (arguments already validated)."""

    tool_name: str
    """The tool's name."""
    call_id: str
    """The provider's id of the call (the id its `ToolCall` record is stored under)."""
    checksum: str
    """The checksum of the raw arguments (see `tool_call_checksum`): what was asked."""
    args: Any
    """The validated arguments (an instance of the tool's input schema)."""
    started_at: datetime
    """When the handler started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionEnd(Event):
    """A tool handler finished, successfully or not."""

    tool_name: str
    """The tool's name."""
    call_id: str
    """The provider's id of the call (the id its `ToolCall` record is stored under)."""
    checksum: str
    """The checksum of the raw arguments (see `tool_call_checksum`): what was asked."""
    args: Any
    """The validated arguments (an instance of the tool's input schema)."""
    started_at: datetime
    """When the handler started."""
    duration_ms: float
    """How long the handler ran, in milliseconds."""
    is_error: bool
    """True when the handler raised."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStored(Event):
    """A completed tool call was persisted (emitted after the store returned)."""

    call: ToolCall
    """The stored record."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDecided(Event):
    """A policy hid or withdrew a tool for the rest of the turn (see `ToolDecision`)."""

    decision: ToolDecision
    """What was decided, by whom and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStored(Event):
    """A message was persisted."""

    message: Message
    """The stored message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReported(Event):
    """An error was raised or reported during the turn."""

    error: LoopError
    """The error."""
    stage: StageName
    """Where it happened."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GateOpened(Event):
    """An approval gate opened; a listener may settle it at once."""

    gate: Gate
    """The open gate."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GateClosed(Event):
    """An approval gate was settled."""

    gate_id: str
    """The gate's id."""
    result: Literal["resolved", "rejected", "aborted", "timeout"]
    """How it was settled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Log(Event):
    """A log record emitted through ``ctx.log`` or by the framework itself."""

    level: LogLevel
    """Severity."""
    kind: str
    """A short machine-readable category (``"listener_error"``, ``"repetition"``, ...)."""
    message: str
    """Human-readable text."""
    payload: dict[str, Any] = field(default_factory=dict)
    """Structured details."""


for _cls in (
    ModelTextDelta,
    Event,
    TurnStart,
    TurnEnd,
    DispatchStart,
    DispatchEnd,
    IterationStart,
    IterationEnd,
    ToolExecutionStart,
    ToolExecutionEnd,
    ToolCallStored,
    ToolDecided,
    MessageStored,
    ErrorReported,
    GateOpened,
    GateClosed,
    Log,
):
    _cls.__module__ = "pipeline.events"
