"""The persistence seam: the `TurnStore` protocol and the default in-memory store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .._events import TurnStatus
    from ..calls._toolcall import ToolCall
    from ..models._message import Message

__all__ = ["MemoryStore", "TurnRecord", "TurnStore"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRecord:
    """The summary of one finished turn, as a store keeps it."""

    turn_id: str
    """The turn's id."""
    conversation_id: str | None
    """The conversation it belongs to, if any."""
    status: TurnStatus
    """How it ended."""
    input: str
    """The user input."""
    output: str | None
    """The final assistant text, if any."""
    iterations: int
    """How many dispatch iterations ran."""
    error_code: str | None
    """The code of the error that failed the turn, if any."""
    error_message: str | None
    """The message of that error, if any."""
    started_at: datetime
    """When the turn started."""
    ended_at: datetime
    """When it ended."""


class TurnStore(Protocol):
    """Where turns, messages and tool calls are persisted.

    Every method must have made the write durable (as far as the store can) before it returns:
    the runner relies on that to promise that a stored call is never lost.
    """

    async def save_turn(self, record: TurnRecord) -> None:
        """Persist (insert or replace) a finished turn's summary."""
        ...

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Persist a message of a turn (insert or replace by message id)."""
        ...

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        """Persist a tool call (insert or replace by turn and id; a replaced one keeps its place).

        Calls are keyed by their turn and id, never by id alone: concurrent turns of one
        conversation may store the same provider id (``call_0``), and both calls are kept.
        """
        ...

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        """Delete a turn's tool call by id; return whether it existed."""
        ...

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return a conversation's messages and tool calls, each in storage order."""
        ...


class MemoryStore:
    """The default store: keeps conversations in process memory (lost when the process exits).

    Turns run without a ``conversation_id`` are not retained: their records live in the
    `TurnResult`, so a long-running process does not grow with every turn.
    """

    __slots__ = ("_calls", "_messages", "_turns")

    def __init__(self) -> None:
        """Create an empty store."""
        self._turns: dict[str, TurnRecord] = {}
        self._messages: dict[str | None, dict[str, Message]] = {}
        self._calls: dict[str | None, dict[tuple[str, str], ToolCall]] = {}
        """Per conversation, calls keyed by (turn id, call id), in storage order."""

    def __repr__(self) -> str:
        """Show how much the store holds."""
        calls = sum(len(c) for c in self._calls.values())
        return f"MemoryStore(turns={len(self._turns)}, tool_calls={calls})"

    async def save_turn(self, record: TurnRecord) -> None:
        """Keep the turn's summary when it belongs to a conversation."""
        if record.conversation_id is not None:
            self._turns[record.turn_id] = record

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Keep a message under its conversation (``None``: no conversation)."""
        if conversation_id is None:
            return
        self._messages.setdefault(conversation_id, {})[message.id] = message

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        """Keep a call under its conversation, replacing its turn's call of that id in place."""
        if conversation_id is None:
            return
        self._calls.setdefault(conversation_id, {})[turn_id, call.id] = call

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        """Forget a turn's tool call; return whether it was there."""
        calls = self._calls.get(conversation_id)
        return calls is not None and calls.pop((turn_id, call_id), None) is not None

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return the conversation's messages and calls in storage order."""
        messages = tuple(self._messages.get(conversation_id, {}).values())
        calls = tuple(self._calls.get(conversation_id, {}).values())
        return messages, calls

    def turn(self, turn_id: str) -> TurnRecord | None:
        """Return a stored turn's summary, if any."""
        return self._turns.get(turn_id)


for _cls in (TurnRecord, TurnStore, MemoryStore):
    _cls.__module__ = "pipeline"
