"""`AnthropicModel`: a `ChatModel` on Anthropic's Messages API (the ``anthropic`` SDK).

The SDK is imported only when a model is built (``import pipeline`` never loads it).

Requests: the system prompt goes to ``system``, the visible tools to ``tools``
(`to_anthropic_tools`), and the conversation to ``messages`` (built in
``pipeline/models/_anthropic_messages.py``: ``tool_use`` blocks with their exact ids, then all
their results first in the next user message, roles alternating). Each turn's conversion is
kept (`PrefixCache`): every request converts only the messages that are new.

Responses: text blocks are joined into the text (thinking blocks are left out of it: they are
the response's `ProviderState`, which the executor stores with the assistant message, and are
sent back before the calls, unchanged, as the API requires with extended thinking: by any model
instance, in any process, after the conversation is reloaded), ``tool_use`` blocks become
`ProposedToolCall` values (``input`` as JSON text), and ``usage`` counts the whole prompt
(Anthropic reports uncached, cache-written and cache-read input tokens apart: they are summed;
the cache reads are ``cached_tokens``).
``stop_reason == "refusal"`` raises `ModelRefusalError`; SDK errors become `ModelError`
subclasses (`to_model_error`) once the SDK's own retries are spent.

Streaming: when ``request.on_text_delta`` is set, the request streams (``stream=True``), each
text delta is passed to it as it arrives, tool inputs are assembled from their
``input_json_delta`` pieces, and the answer is read back into the same `Message` the API
would have sent whole, so the `ModelResponse` is the same as without streaming.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Self, cast

from .._extras import import_extra
from ..errors import ModelAuthenticationError, ModelRefusalError, ModelUnavailableError
from ._anthropic_errors import PROVIDER, to_model_error
from ._anthropic_messages import Alternation, Wire, convert_step
from ._prefix import ConversationStep, PrefixCache
from ._provider_state import ProviderState
from ._seam import ModelRequest, ModelResponse, ProposedToolCall, Usage
from ._tool_defs import to_anthropic_tools

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import (
        MessageParam,
        RawContentBlockDeltaEvent,
        RawMessageDeltaEvent,
        ToolUnionParam,
    )

    from ..artifacts._envelope import ToolLookup

__all__ = ["AnthropicModel"]

_RESERVED: Final = frozenset({"messages", "model", "stream", "system", "tools"})
_THINKING_FIELDS: Final = {
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}


class AnthropicModel:
    """A `ChatModel` on Anthropic's Messages API (``client.messages.create``).

    Args:
        model: The model name (``"claude-sonnet-4-5"``, ...).
        client: A ready ``anthropic.AsyncAnthropic``; its retry and timeout settings are the
            ones used. Without it, one is built from ``base_url`` and ``api_key`` and the
            SDK's usual environment variables (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).
        base_url: The API's base URL, when building the client.
        api_key: The API key, when building the client.
        max_tokens: The most tokens one answer may have (the API requires a limit).
        **settings: More parameters of the SDK's ``messages.create`` (``stop_sequences``,
            ``tool_choice``, ``thinking``, ``metadata``, ``timeout``, ``extra_headers``,
            ``extra_body`` for API fields the SDK does not name...), and ``max_retries``, the
            SDK's retry count (set on the client).

    Raises:
        ModelAuthenticationError: no client was given and no credentials were found (set
            ``ANTHROPIC_API_KEY``).
        ValueError: an empty model name or a bad ``max_tokens``.
        TypeError: ``client`` together with ``api_key`` or ``base_url``, a setting the model
            sets itself (``messages``, ``system``, ``tools``, ``stream``), or one that
            ``messages.create`` does not take.
        ImportError: the ``anthropic`` package is not installed.
    """

    __slots__ = (
        "_cache",
        "_merged",
        "_tools_view",
        "client",
        "max_tokens",
        "model",
        "settings",
    )

    provider: Final = PROVIDER
    """``"anthropic"`` (what the errors of this model name as their provider)."""

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        **settings: Any,
    ) -> None:
        """Check the arguments and build the client when none is given."""
        name: object = model
        if not isinstance(name, str) or not name:
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        limit: object = max_tokens
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"max_tokens must be a positive int, got {limit!r}")
        if reserved := sorted(_RESERVED.intersection(settings)):
            raise TypeError(f"settings {reserved} are set by the model itself; remove them")
        if unknown := sorted(set(settings) - _create_parameters() - {"max_retries"}):
            raise TypeError(
                f"settings {unknown} are not parameters of the SDK's messages.create; send "
                "other API fields with extra_body={...}"
            )
        if client is not None and (base_url is not None or api_key is not None):
            raise TypeError("give client= or base_url=/api_key=, not both")
        max_retries = settings.pop("max_retries", None)
        if client is None:
            client = _build_client(model, base_url, api_key, max_retries)
        elif max_retries is not None:
            client = client.with_options(max_retries=max_retries)
        self.model = model
        """The model name sent with every request."""
        self.max_tokens = max_tokens
        """The most tokens one answer may have."""
        self.settings: Mapping[str, Any] = settings
        """More parameters of ``messages.create``, sent with every request."""
        self.client = client
        """The SDK client every request goes through."""
        self._tools_view: ToolLookup | None = None
        self._cache: PrefixCache[Wire] = PrefixCache(self._convert)
        self._merged = Alternation()

    def __repr__(self) -> str:
        """Show the model name and the token limit."""
        return f"AnthropicModel({self.model!r}, max_tokens={self.max_tokens})"

    async def aclose(self) -> None:
        """Close the SDK client's connections (a client you passed in too); await it when done."""
        await self.client.close()

    async def __aenter__(self) -> Self:
        """``async with model:`` closes the client at the end."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the client."""
        await self.aclose()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the model once (streaming when ``request.on_text_delta`` is set).

        Raises:
            ModelError: a subclass for each failure (rate limit, authentication, bad request
                or context length, unavailable, timeout, refusal); the SDK's error is the
                cause.
        """
        messages = cast("list[MessageParam]", self.messages(request))
        options: dict[str, Any] = dict(self.settings)
        if request.system_prompt:
            options["system"] = request.system_prompt
        if request.tools:
            options["tools"] = cast("list[ToolUnionParam]", to_anthropic_tools(request.tools))
        on_text_delta = request.on_text_delta
        arguments: dict[str, str] = {}
        try:
            if on_text_delta is None:
                message = await self.client.messages.create(
                    model=self.model, max_tokens=self.max_tokens, messages=messages, **options
                )
                data = message.model_dump(mode="json")
            else:
                data = await self._stream(messages, options, on_text_delta, arguments)
        except Exception as exc:  # CancelledError is a BaseException: it passes through
            error = to_model_error(exc, model=self.model)
            if error is None:
                raise
            raise error from exc
        return _response(data, self.model, arguments)

    def messages(self, request: ModelRequest) -> list[Wire]:
        """The ``messages`` parameter for ``request`` (converting only what is new)."""
        self._tools_view = request.tool_view
        try:  # convert() reads the tools: set only while the cache converts, synchronously
            converted = self._cache.messages(request)
        finally:
            self._tools_view = None
        return self._merged.messages(request.turn_id, converted)

    def _convert(self, step: ConversationStep) -> list[Wire]:
        return convert_step(step, self._tools_view)

    async def _stream(
        self,
        messages: list[MessageParam],
        options: dict[str, Any],
        on_text_delta: Callable[[str], None],
        arguments: dict[str, str],
    ) -> Wire:
        from anthropic import types as t

        stream = await self.client.messages.create(
            model=self.model, max_tokens=self.max_tokens, messages=messages, stream=True, **options
        )
        snapshot: Wire | None = None
        blocks: dict[int, Wire] = {}
        partial: dict[int, list[str]] = {}
        async with stream:
            async for event in stream:
                if isinstance(event, t.RawMessageStartEvent):
                    snapshot = event.message.model_dump(mode="json")
                elif isinstance(event, t.RawContentBlockStartEvent):
                    blocks[event.index] = event.content_block.model_dump(mode="json")
                elif isinstance(event, t.RawContentBlockDeltaEvent):
                    _apply_delta(blocks[event.index], event, partial, on_text_delta)
                elif isinstance(event, t.RawContentBlockStopEvent):
                    _finish_input(blocks[event.index], partial.pop(event.index, None), arguments)
                elif isinstance(event, t.RawMessageDeltaEvent) and snapshot is not None:
                    _apply_message_delta(snapshot, event)
        if snapshot is None:
            raise ModelUnavailableError(  # pragma: no cover - the API always starts with it
                "the Anthropic stream ended before its message_start event",
                provider=PROVIDER,
                model=self.model,
            )
        for index, pieces in partial.items():  # a stream cut short: finish what arrived
            _finish_input(blocks[index], pieces, arguments)
        snapshot["content"] = [blocks[i] for i in sorted(blocks)]
        # Built as the SDK builds a whole answer (construct, no validation): the same dump.
        return t.Message.construct(**snapshot).model_dump(mode="json")


def _create_parameters() -> frozenset[str]:
    """The keyword parameters of the installed SDK's ``messages.create``."""
    import_extra("anthropic", "anthropic", "AnthropicModel")
    from anthropic.resources.messages import AsyncMessages
    return frozenset(inspect.signature(AsyncMessages.create).parameters) - {"self"}


def _build_client(
    model: str, base_url: str | None, api_key: str | None, max_retries: int | None
) -> AsyncAnthropic:
    import anthropic  # present: _create_parameters imported it

    try:
        if max_retries is None:
            client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url)
        else:
            client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries
            )
    except anthropic.CredentialsError as exc:
        raise ModelAuthenticationError(
            f"could not load Anthropic credentials ({exc}): set the ANTHROPIC_API_KEY "
            "environment variable, or pass api_key= (or a ready client=)",
            provider=PROVIDER,
            model=model,
        ) from exc
    if not (client.api_key or client.auth_token or client.credentials):
        raise ModelAuthenticationError(
            "no Anthropic API key: set the ANTHROPIC_API_KEY environment variable, or pass "
            "api_key= (or a ready client=)",
            provider=PROVIDER,
            model=model,
        )
    return client


# -- the answer --------------------------------------------------------------------------------
def _response(data: Wire, model: str, arguments: Mapping[str, str]) -> ModelResponse:
    """The `ModelResponse` for a message (``model_dump(mode="json")`` of the SDK's `Message`).

    ``arguments`` holds the raw input text of streamed tool calls whose input was no JSON
    object (the executor turns it into an error call the model reads).
    """
    texts: list[str] = []
    calls: list[ProposedToolCall] = []
    for block in data["content"]:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "tool_use":
            raw = arguments.get(block["id"])
            if raw is None:
                raw = json.dumps(block["input"], ensure_ascii=False)
            calls.append(ProposedToolCall(block["id"], block["name"], raw))
    stop_reason = data.get("stop_reason")
    if stop_reason == "refusal":
        details = data.get("stop_details") or {}
        why = details.get("explanation")
        category = details.get("category")
        raise ModelRefusalError(
            "the model refused to answer"
            + (f" ({category})" if category else "")
            + (f": {why}" if why else ""),
            provider=PROVIDER,
            model=data.get("model") or model,
        )
    thinking = tuple(
        {key: block[key] for key in _THINKING_FIELDS[block["type"]]}
        for block in data["content"]
        if block.get("type") in _THINKING_FIELDS
    )
    return ModelResponse(
        text="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        usage=_usage(data.get("usage") or {}),
        model=data.get("model") or model,
        finish_reason=stop_reason,
        raw=data,
        provider_state=ProviderState(provider=PROVIDER, items=thinking) if thinking else None,
    )


def _usage(usage: Wire) -> Usage:
    cache_read = usage.get("cache_read_input_tokens") or 0
    cache_write = usage.get("cache_creation_input_tokens") or 0
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=(usage.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=usage.get("output_tokens") or 0,
        cached_tokens=cache_read,
        reasoning_tokens=details.get("thinking_tokens") or 0,
    )


# -- streaming ---------------------------------------------------------------------------------
def _apply_delta(
    block: Wire,
    event: RawContentBlockDeltaEvent,
    partial: dict[int, list[str]],
    on_text_delta: Callable[[str], None],
) -> None:
    delta = event.delta
    if delta.type == "text_delta":
        block["text"] = block.get("text", "") + delta.text
        on_text_delta(delta.text)
    elif delta.type == "input_json_delta":
        partial.setdefault(event.index, []).append(delta.partial_json)
    elif delta.type == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta.thinking
    elif delta.type == "signature_delta":
        block["signature"] = delta.signature
    elif delta.type == "citations_delta":
        cited = delta.citation.model_dump(mode="json")
        block["citations"] = [*(block.get("citations") or []), cited]


def _finish_input(block: Wire, pieces: list[str] | None, arguments: dict[str, str]) -> None:
    """Parse a streamed tool input (kept as raw text in ``arguments`` if it is no object)."""
    if pieces is None:
        return
    text = "".join(pieces)
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        value = None
    if isinstance(value, dict):
        block["input"] = value
    elif "id" in block:
        arguments[block["id"]] = text


def _apply_message_delta(snapshot: Wire, event: RawMessageDeltaEvent) -> None:
    """Fold a ``message_delta`` into the message (usage counts are cumulative totals)."""
    delta = event.delta
    snapshot["stop_reason"] = delta.stop_reason
    snapshot["stop_sequence"] = delta.stop_sequence
    snapshot["stop_details"] = (
        delta.stop_details.model_dump(mode="json") if delta.stop_details is not None else None
    )
    if delta.container is not None:
        snapshot["container"] = delta.container.model_dump(mode="json")
    usage, reported = snapshot["usage"], event.usage
    usage["output_tokens"] = reported.output_tokens
    for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = getattr(reported, name)
        if value is not None:
            usage[name] = value
    for name in ("server_tool_use", "output_tokens_details"):
        value = getattr(reported, name)
        if value is not None:
            usage[name] = value.model_dump(mode="json")


AnthropicModel.__module__ = "pipeline.models"
