"""The model seam: messages, requests, responses and the `ChatModel` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol

from .._errors import InvalidToolCallError
from .._ids import new_id

if TYPE_CHECKING:
    from .._tool import ToolDescription
    from .._toolcall import ToolCall

__all__ = ["ChatModel", "Message", "ModelRequest", "ModelResponse", "ProposedToolCall"]


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


@dataclass(frozen=True, slots=True)
class ProposedToolCall:
    """A tool call proposed by the model, arguments as raw JSON text."""

    id: str
    """The provider's call id."""
    name: str
    """The tool the model wants to call."""
    arguments: str
    """The arguments as JSON text, exactly as the provider sent them."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the executor sends to the model on one iteration."""

    system_prompt: str | None
    """The runner's system prompt."""
    messages: tuple[Message, ...]
    """The conversation so far (history and this turn)."""
    tool_calls: tuple[ToolCall, ...]
    """Completed tool calls so far (history and this turn), in storage order."""
    tools: tuple[ToolDescription, ...]
    """Descriptions of the tools the model may call (visible tools only). They are shared with
    later requests, so never change them in place: render a copy (``to_openai_tools``, ...)."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The model's answer: final text and/or tool calls to run."""

    text: str | None = None
    """Assistant text, if any."""
    tool_calls: Sequence[ProposedToolCall] = ()
    """Proposed tool calls; empty means the model answered."""


class ChatModel(Protocol):
    """Anything that completes a `ModelRequest`: the only place a model is called."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request."""
        ...


for _cls in (Message, ProposedToolCall, ModelRequest, ModelResponse, ChatModel):
    _cls.__module__ = "pipeline"
