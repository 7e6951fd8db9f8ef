"""`Message`: one message of a conversation, and `new_message`, its constructor on the hot path.

A message is a value of the conversation, below everything that carries it: stores keep it,
`MessageStored` carries it, a `ModelRequest` shows the conversation as messages. It knows its
tool calls by id only (``tool_call_ids``), so it imports no record, tool or request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from .._frozen import slot_setters
from .._ids import new_id
from ..errors import InvalidToolCallError
from ._provider_state import ProviderState

__all__ = ["Message", "new_message"]


def _message_id() -> str:
    return new_id("msg")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a conversation."""

    role: Literal["user", "assistant"]
    """Who said it."""
    content: str
    """The text."""
    id: str = field(default_factory=_message_id)
    """Unique id (generated when not given)."""
    created_at: datetime = field(default_factory=_now)
    """When the message was created (aware)."""
    tool_call_ids: tuple[str, ...] = ()
    """Ids of the tool calls an assistant message proposed, in order."""
    provider_state: ProviderState | None = None
    """What the provider asked to get back with this assistant message (thinking blocks,
    reasoning items, a ``phase``), kept and stored with it; None for most messages."""

    def __post_init__(self) -> None:
        """Reject a bad role, a non-string content, an empty id or a naive timestamp."""
        if self.role not in ("user", "assistant"):
            raise InvalidToolCallError(
                f"message role must be 'user' or 'assistant', got {self.role!r}"
            )
        if not isinstance(self.content, str):
            raise InvalidToolCallError("message content must be a string")
        message_id: object = self.id  # typed str, but checked: callers may pass anything
        if not isinstance(message_id, str) or not message_id:
            raise InvalidToolCallError(f"message id must be a non-empty string, got {message_id!r}")
        created_at: object = self.created_at
        if not isinstance(created_at, datetime) or created_at.tzinfo is None:
            raise InvalidToolCallError("message created_at must be a timezone-aware datetime")
        state: object = self.provider_state
        if state is not None and not isinstance(state, ProviderState):
            raise InvalidToolCallError("message provider_state must be a ProviderState or None")


_MESSAGE_SETTERS: Final = slot_setters(
    Message, "role", "content", "id", "created_at", "tool_call_ids", "provider_state"
)


def new_message(
    role: Literal["user", "assistant"],
    content: str,
    tool_call_ids: tuple[str, ...] = (),
    provider_state: ProviderState | None = None,
) -> Message:
    """A new `Message` with a fresh id and timestamp, without the checks it cannot fail.

    The loop's hot path (the executor makes one per iteration); ``role`` must be one of the
    two and ``tool_call_ids`` strs.

    Raises:
        InvalidToolCallError: ``content`` is not a str (a model answered with something else).
    """
    if type(content) is not str and not isinstance(content, str):
        raise InvalidToolCallError("message content must be a string")
    message: Message = object.__new__(Message)
    role_, text, id_, created_at, ids, state = _MESSAGE_SETTERS
    role_(message, role)
    text(message, content)
    id_(message, new_id("msg"))
    created_at(message, datetime.now(UTC))
    ids(message, tool_call_ids)
    state(message, provider_state)
    return message


Message.__module__ = "pipeline.models"
