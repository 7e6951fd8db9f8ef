"""`OpenAIResponsesModel`: a `ChatModel` on OpenAI's Responses API.

The request, per iteration: ``instructions`` (the system prompt), ``input`` (the conversation
as items, converted once per turn through a `PrefixCache`: user and assistant messages, one
``function_call`` item per call with its exact ``call_id``, name and stored arguments as compact
JSON (or the text the model sent, when it was no JSON object), then one
``function_call_output`` item per call with the result rendered in its trust envelope),
``tools`` as Responses function tools (``strict: false``), ``store: false`` (the default: the
conversation is sent whole every time, nothing is kept at OpenAI), ``include:
["reasoning.encrypted_content"]`` (the default: a reasoning model's reasoning comes back
encrypted) and the model's settings as given.

Provider state: a response's reasoning items (``encrypted_content`` included) and its message's
``phase`` become the response's `ProviderState`; the executor stores it with the assistant
message, and the conversion sends the reasoning items back, as received, before that message
(with its ``phase``) and its calls. So a reasoning model keeps its reasoning from a tool call to
the answer, across model instances, processes and durable re-runs.

A result's media ride in its ``function_call_output``, which takes content items: an
``input_text`` item with the envelope, then an ``input_image`` per image and an ``input_file``
per document, as base64 data URLs; audio and video (which tool outputs cannot carry) are
described in text.

`openai` is imported lazily (in the constructor): ``import pipeline`` never loads the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ..artifacts._envelope import ToolLookup, render_tool_result
from ..errors import ModelRefusalError, ModelUnavailableError
from ._openai_base import OpenAIBase
from ._openai_errors import from_openai_error, from_response_error
from ._openai_shared import (
    NO_RESULT,
    UNKNOWN_TOOL,
    arguments_text,
    call_arguments,
    call_id,
    data_url,
    int_field,
    media_label,
    read_media,
    wire_name,
)
from ._provider_state import ProviderState
from ._seam import ModelResponse, ProposedToolCall, Usage
from ._tool_defs import to_openai_tools

if TYPE_CHECKING:
    from ..artifacts._media import Media
    from ..calls._toolcall import ToolCall
    from ._prefix import ConversationStep
    from ._seam import ModelRequest
    from ._tool_defs import ToolDescription

__all__ = ["OpenAIResponsesModel"]

_RESERVED: Final = frozenset({"model", "input", "instructions", "tools", "stream"})
PROVIDER_STATE: Final = "openai-responses"
"""The `ProviderState.provider` of this API's state (reasoning items, ``phase``)."""
ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
_FINAL_EVENTS: Final = frozenset({"response.completed", "response.incomplete"})

Json = dict[str, Any]


class OpenAIResponsesModel(OpenAIBase):
    """A `ChatModel` on OpenAI's Responses API.

    Retries and timeouts are the SDK's own: pass a ready ``client`` (or the ``max_retries``
    and ``timeout`` settings) to tune them; what still fails maps to the `ModelError` family,
    as does a response that comes back ``failed``. A refusal, or an answer cut short by the
    content filter, raises `ModelRefusalError`. ``finish_reason`` is ``"tool_calls"`` when
    the model called tools, ``"stop"`` when it answered, and the ``incomplete_details``
    reason (``"max_output_tokens"``...) when the response is incomplete.

    When the request has ``on_text_delta`` set (somebody listens for `ModelTextDelta`), the
    response is streamed: each ``response.output_text.delta`` is passed on, and the final
    response is the one the ``response.completed`` event carries, so the `ModelResponse` is
    the same as without streaming.

    With ``store=False`` (the default) nothing from earlier iterations is kept by OpenAI: the
    reasoning items come back encrypted (``include=["reasoning.encrypted_content"]``, the
    default) and are sent back with the assistant message they preceded (its `ProviderState`),
    with the message's ``phase``. Pass ``include=[]`` to a server that refuses the field.

    Args:
        model: The model name (``"gpt-4.1-mini"``...).
        client: A ready ``openai.AsyncOpenAI``; otherwise one is built from ``base_url``,
            ``api_key`` and the SDK's environment variables (``OPENAI_API_KEY``...).
        base_url: Another API root (a proxy, or a server speaking the Responses API).
        api_key: The API key.
        **settings: Passed to ``client.responses.create`` on every request (``temperature``,
            ``max_output_tokens``, ``parallel_tool_calls``, ``reasoning``, ``store``,
            ``timeout``...), except ``max_retries``, which configures the client.

    Raises:
        ModelAuthenticationError: no API key was given or found.
    """

    __slots__ = ()

    RESERVED = _RESERVED
    DEFAULTS: ClassVar[Mapping[str, Any]] = MappingProxyType(
        {"store": False, "include": [ENCRYPTED_REASONING]}
    )

    def request_arguments(self, request: ModelRequest) -> Json:
        """The keyword arguments of ``responses.create`` for ``request`` (not streamed).

        Only what is new since the turn's previous request is converted.
        """
        self._tools_view = request.tool_view
        try:
            items = self._prefix.messages(request)
        finally:
            self._tools_view = None
        body: Json = {"model": self.model, "input": items}
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = self._tool_defs(request.tools)
        body.update(self._settings)
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request (streamed when ``request.on_text_delta`` is set).

        Raises:
            ModelError: the provider failed the request (a subclass says how).
        """
        import openai

        body = self.request_arguments(request)
        create = self._client.responses.create
        try:
            if request.on_text_delta is None:
                response = await create(**body)
                raw = response.model_dump(mode="json", warnings=False)
            else:
                stream = await create(**body, stream=True)
                async with stream:
                    raw = await self._read_stream(stream, request.on_text_delta)
        except openai.OpenAIError as exc:
            raise from_openai_error(exc, provider=self.provider, model=self.model) from exc
        return self._parse(raw)

    def forget(self, turn_id: str) -> None:
        """Drop a finished turn's converted conversation (it is also evicted when old)."""
        self._prefix.forget(turn_id)

    def _render_tools(self, tools: tuple[ToolDescription, ...]) -> list[Json]:
        """Responses function tools (flat, ``strict: false``)."""
        return [
            {"type": "function", **tool["function"], "strict": False}
            for tool in to_openai_tools(tools)
        ]

    def _convert(self, step: ConversationStep) -> list[Json]:
        """One conversation step as Responses input items (see the module docstring)."""
        message = step.message
        ids = message.tool_call_ids
        if message.role == "user":
            return [{"role": "user", "content": message.content}]
        state = message.provider_state
        if state is None or state.provider != PROVIDER_STATE:
            state = None
        items: list[Json] = [dict(item) for item in state.items] if state is not None else []
        said: Json = {"role": "assistant", "content": message.content}
        if state is not None and state.phase is not None:
            said["phase"] = state.phase
        if not ids:
            return [*items, said]
        tools = self._tools_view
        calls = {call.id: call for call in step.results}
        if message.content:
            items.append(said)
        outputs: list[Json] = []
        for cid in ids:
            call = calls.get(cid)
            items.append(
                {
                    "type": "function_call",
                    "call_id": cid,
                    "name": wire_name(call.tool) if call is not None else UNKNOWN_TOOL,
                    "arguments": call_arguments(call) if call is not None else "{}",
                }
            )
            output = _output(call, cid, tools) if call is not None else NO_RESULT
            outputs.append({"type": "function_call_output", "call_id": cid, "output": output})
        return items + outputs

    async def _read_stream(self, stream: Any, on_text_delta: Callable[[str], None]) -> Json:
        """Pass each text delta on; the final response as plain data.

        ``stream`` is the SDK's ``AsyncStream[ResponseStreamEvent]`` (Any: its union of event
        types is read by ``type`` only).
        """
        async for event in stream:
            kind = getattr(event, "type", None)
            if kind == "response.output_text.delta":
                if event.delta:
                    on_text_delta(event.delta)
            elif kind in _FINAL_EVENTS:
                final: Json = event.response.model_dump(mode="json", warnings=False)
                return final
            elif kind == "response.failed":
                raw = event.response.model_dump(mode="json", warnings=False)
                raise self._failure(raw.get("error") or {})
            elif kind == "error":
                raise from_response_error(
                    getattr(event, "code", None),
                    getattr(event, "message", None),
                    provider=self.provider,
                    model=self.model,
                )
        raise ModelUnavailableError(
            "the response stream ended before the response completed",
            provider=self.provider,
            model=self.model,
        )

    def _failure(self, error: Json) -> Exception:
        return from_response_error(
            error.get("code"), error.get("message"), provider=self.provider, model=self.model
        )

    def _parse(self, raw: Json) -> ModelResponse:
        """A response (as plain data) as a `ModelResponse`.

        Raises:
            ModelError: the response failed.
            ModelRefusalError: the model refused, or the content filter stopped the answer.
        """
        provider, model = self.provider, self.model
        if raw.get("status") == "failed" or raw.get("error"):
            raise self._failure(raw.get("error") or {})
        texts: list[str] = []
        calls: list[ProposedToolCall] = []
        reasoning: list[Json] = []
        phase: str | None = None
        for item in raw.get("output") or ():
            kind = item.get("type")
            if kind == "reasoning":  # the SDK's dump spells unset fields as null: not sent back
                reasoning.append({key: value for key, value in item.items() if value is not None})
            elif kind == "message":
                if isinstance(item.get("phase"), str):
                    phase = item["phase"]
                for part in item.get("content") or ():
                    if part.get("type") == "refusal":
                        raise ModelRefusalError(
                            str(part.get("refusal") or "the model refused"),
                            provider=provider,
                            model=model,
                        )
                    if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
            elif kind == "function_call":
                calls.append(
                    ProposedToolCall(
                        call_id(item.get("call_id")),
                        str(item.get("name") or ""),
                        arguments_text(item.get("arguments")),
                    )
                )
        reason = (raw.get("incomplete_details") or {}).get("reason")
        if reason == "content_filter":
            raise ModelRefusalError(
                "the provider's content filter stopped the answer", provider=provider, model=model
            )
        if raw.get("status") == "incomplete":
            finish = reason if isinstance(reason, str) else "incomplete"
        else:
            finish = "tool_calls" if calls else "stop"
        usage = raw.get("usage")
        return ModelResponse(
            text="".join(texts) if texts else None,
            tool_calls=tuple(calls),
            usage=Usage(
                int_field(usage, "input_tokens"),
                int_field(usage, "output_tokens"),
                int_field(usage, "input_tokens_details", "cached_tokens"),
                int_field(usage, "output_tokens_details", "reasoning_tokens"),
            ),
            model=raw.get("model") if isinstance(raw.get("model"), str) else None,
            finish_reason=finish,
            raw=raw,
            provider_state=(
                ProviderState(provider=PROVIDER_STATE, items=tuple(reasoning), phase=phase)
                if reasoning or phase is not None
                else None
            ),
        )


def _output(call: ToolCall, cid: str, tools: ToolLookup | None) -> str | list[Json]:
    """A call's ``function_call_output``: the envelope text, with its media as content items."""
    rendered = render_tool_result(call, tools)
    if not rendered.media:
        return rendered.text
    items: list[Json] = [{"type": "input_text", "text": rendered.text}]
    for media in rendered.media:
        items += _media_items(media, cid)
    return items


def _media_items(media: Media, call: str) -> list[Json]:
    content = read_media(media)
    if content is None:
        return [_text(media_label(media, call, "its content could not be read"))]
    if media.kind == "image":
        item: Json = {"type": "input_image", "image_url": data_url(media, content)}
    elif media.kind == "document":
        item = {
            "type": "input_file",
            "filename": media.filename,
            "file_data": data_url(media, content),
        }
    else:
        note = f"not attached: tool outputs take no {media.kind} content"
        return [_text(media_label(media, call, note))]
    return [_text(media_label(media, call)), item]


def _text(text: str) -> Json:
    return {"type": "input_text", "text": text}


OpenAIResponsesModel.__module__ = "pipeline.models"
