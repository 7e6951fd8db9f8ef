"""The model seam: requests, responses and the `ChatModel` protocol.

A `ModelRequest` is built from the turn's messages (``_message.py``), records and tools, so it
sits above them; the machinery that builds one (`DispatchContext.model_request`) sits above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._frozen import slot_setters

if TYPE_CHECKING:
    from ..artifacts._envelope import ToolLookup
    from ..calls._toolcall import ToolCall
    from ._message import Message
    from ._provider_state import ProviderState
    from ._tool_defs import ToolDescription

__all__ = ["ChatModel", "ModelRequest", "ModelResponse", "ProposedToolCall", "Usage"]

USAGE_FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")


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
class Usage:
    """Tokens a model call (or a whole turn) used, as the provider reported them."""

    input_tokens: int = 0
    """Tokens of the prompt (cached ones included)."""
    output_tokens: int = 0
    """Tokens the model generated (reasoning ones included)."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its cache."""
    reasoning_tokens: int = 0
    """Generated tokens spent on hidden reasoning."""

    def __add__(self, other: Usage) -> Usage:
        """Sum two usages field by field."""
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        """The four counts as plain data (what the stash keeps)."""
        return {name: getattr(self, name) for name in USAGE_FIELDS}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Usage:
        """Read the four counts back from plain data (missing or non-int counts are 0)."""
        if not data:
            return cls()
        values = [data.get(name, 0) for name in USAGE_FIELDS]
        return cls(*(v if type(v) is int else 0 for v in values))


NO_USAGE: Final = Usage()
"""The usage of a response whose model reports none (one shared, immutable value)."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the executor sends to the model on one iteration."""

    system_prompt: str | None
    """The runner's system prompt."""
    messages: Sequence[Message]
    """The conversation so far (history and this turn): a read-only view shared with the turn,
    not a copy, that keeps showing what it held when the request was made."""
    tool_calls: Sequence[ToolCall]
    """Completed tool calls so far (history and this turn), in storage order (a view too)."""
    tools: tuple[ToolDescription, ...]
    """Descriptions of the tools the model may call (visible tools only). They are shared with
    later requests, so never change them in place: render a copy (``to_openai_tools``, ...)."""
    _: KW_ONLY
    turn_id: str | None = None
    """The turn the request belongs to: a provider model keeps its converted prefix of the
    conversation per turn, so each iteration converts only what is new."""
    tool_view: ToolLookup | None = None
    """The turn's tools as they were when the request was made (read-only, `ToolRegistry.view`),
    for rendering tool results in their trust envelopes
    (``render_tool_result(call, request.tool_view)``); None renders every tool untrusted."""
    on_text_delta: Callable[[str], None] | None = None
    """Set when somebody listens for `ModelTextDelta`: a model that can stream calls it with
    each piece of answer text as it arrives (the final `ModelResponse` is the same)."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The model's answer: final text and/or tool calls to run."""

    text: str | None = None
    """Assistant text, if any."""
    tool_calls: Sequence[ProposedToolCall] = ()
    """Proposed tool calls; empty means the model answered."""
    usage: Usage = NO_USAGE
    """Tokens this call used, as the provider reported them (`NO_USAGE` when not reported)."""
    model: str | None = None
    """The model that answered, as the provider named it."""
    finish_reason: str | None = None
    """Why the model stopped (``"stop"``, ``"tool_calls"``, ``"length"``, ...), as reported."""
    raw: Any = None
    """The provider's payload, as plain data, for replay and audit (None for scripted models)."""
    provider_state: ProviderState | None = None
    """What the provider asked to get back with this answer (thinking blocks, reasoning items,
    a ``phase``): the executor keeps it on the assistant message it stores."""


class ChatModel(Protocol):
    """Anything that completes a `ModelRequest`: the only place a model is called."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request."""
        ...


_REQUEST_SETTERS: Final = slot_setters(
    ModelRequest,
    *("system_prompt", "messages", "tool_calls", "tools", "turn_id", "tool_view", "on_text_delta"),
)


def model_request(
    system_prompt: str | None,
    messages: Sequence[Message],
    tool_calls: Sequence[ToolCall],
    tools: tuple[ToolDescription, ...],
    turn_id: str | None,
    tool_view: ToolLookup | None,
    on_text_delta: Callable[[str], None] | None,
) -> ModelRequest:
    """A `ModelRequest` of these fields, as ``ModelRequest(...)`` builds it, for the hot path."""
    request: ModelRequest = object.__new__(ModelRequest)
    prompt_, messages_, calls_, tools_, turn_, view_, delta_ = _REQUEST_SETTERS
    prompt_(request, system_prompt)
    messages_(request, messages)
    calls_(request, tool_calls)
    tools_(request, tools)
    turn_(request, turn_id)
    view_(request, tool_view)
    delta_(request, on_text_delta)
    return request


for _cls in (ProposedToolCall, ModelRequest, ModelResponse, ChatModel, Usage):
    _cls.__module__ = "pipeline.models"
