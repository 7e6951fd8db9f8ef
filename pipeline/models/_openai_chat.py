"""`OpenAIChatModel`: a `ChatModel` on OpenAI's Chat Completions API (and compatible servers).

The request, per iteration:

* the system prompt as the first message (``role: system``);
* the conversation in order, converted once per turn through a `PrefixCache` (each iteration
  converts only what is new): user messages, assistant messages (``content`` text or null,
  ``tool_calls`` with the exact call ids, ``type: function``, the stored arguments as compact
  JSON), then one ``role: tool`` message per call with the result rendered in its trust
  envelope (`render_tool_result`);
* ``tools`` from `to_openai_tools`, and the model's settings (``temperature``,
  ``max_completion_tokens``, ``parallel_tool_calls``...) as given.

Tool messages take text only, so the media a result carries follow the tool messages as one
``user`` message: an ``image_url`` part per image, a ``file`` part per document and an
``input_audio`` part per WAV or MP3 sound, all as base64 data URLs, each after a text part
naming its media id and call; video (which the API does not take) is described in text.

`openai` is imported lazily (in the constructor): ``import pipeline`` never loads the SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

from ..artifacts._envelope import render_tool_result
from ..errors import ModelRefusalError, ModelUnavailableError
from ._openai_base import OpenAIBase
from ._openai_errors import from_openai_error
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
from ._seam import ModelResponse, ProposedToolCall, Usage
from ._tool_defs import to_openai_tools

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

    from ..artifacts._media import Media
    from ._prefix import ConversationStep
    from ._seam import ModelRequest
    from ._tool_defs import ToolDescription

__all__ = ["OpenAIChatModel"]

_RESERVED: Final = frozenset({"model", "messages", "tools", "stream", "stream_options"})
_AUDIO_FORMATS: Final = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3"}

Json = dict[str, Any]


class OpenAIChatModel(OpenAIBase):
    """A `ChatModel` on the Chat Completions API of OpenAI or any OpenAI-compatible server.

    ``base_url`` points it at another server (vLLM, Ollama, llama.cpp's server, LM Studio...);
    such servers sometimes omit call ids (one is minted) or send the arguments as an object
    (re-encoded as JSON text). Retries and timeouts are the SDK's own: pass a ready ``client``
    (or the ``max_retries`` and ``timeout`` settings) to tune them; what still fails maps to the
    `ModelError` family (``E_MODEL_RATE_LIMITED``, ``E_MODEL_AUTHENTICATION``...). A refusal or
    a ``content_filter`` finish raises `ModelRefusalError`.

    When the request has ``on_text_delta`` set (somebody listens for `ModelTextDelta`), the
    answer is streamed (with ``stream_options.include_usage``): each piece of text is passed on
    as it arrives and the tool calls are assembled from the stream; the `ModelResponse` is the
    same as without streaming (``raw`` then holds the assembled completion).

    Args:
        model: The model name (``"gpt-4.1-mini"``, or whatever the server serves).
        client: A ready ``openai.AsyncOpenAI``; otherwise one is built from ``base_url``,
            ``api_key`` and the SDK's environment variables (``OPENAI_API_KEY``...).
        base_url: The server's API root, e.g. ``"http://localhost:11434/v1"``. Without a key
            anywhere a placeholder is sent.
        api_key: The API key.
        **settings: Passed to ``client.chat.completions.create`` on every request
            (``temperature``, ``max_completion_tokens``, ``parallel_tool_calls``,
            ``tool_choice``, ``timeout``...), except ``max_retries``, which configures the
            client. ``model``, ``messages``, ``tools`` and the streaming options are the
            model's own.

    Raises:
        ModelAuthenticationError: no API key was given or found.
    """

    __slots__ = ()

    RESERVED = _RESERVED

    def request_arguments(self, request: ModelRequest) -> Json:
        """The keyword arguments of ``chat.completions.create`` for ``request`` (not streamed).

        Only what is new since the turn's previous request is converted.
        """
        messages: list[Json] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        self._tools_view = request.tool_view
        try:
            messages += self._prefix.messages(request)
        finally:
            self._tools_view = None
        body: Json = {"model": self.model, "messages": messages}
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
        create = self._client.chat.completions.create
        try:
            if request.on_text_delta is None:
                completion = await create(**body)
                raw = completion.model_dump(mode="json", warnings=False)
            else:
                stream = await create(**body, stream=True, stream_options={"include_usage": True})
                async with stream:
                    raw = await _assemble(stream, request.on_text_delta)
                if raw["choices"][0]["finish_reason"] is None:
                    raise ModelUnavailableError(
                        "the stream ended before the answer was complete",
                        provider=self.provider,
                        model=self.model,
                    )
        except openai.OpenAIError as exc:
            raise from_openai_error(exc, provider=self.provider, model=self.model) from exc
        return parse_completion(raw, provider=self.provider, model=self.model)

    def forget(self, turn_id: str) -> None:
        """Drop a finished turn's converted conversation (it is also evicted when old)."""
        self._prefix.forget(turn_id)

    def _render_tools(self, tools: tuple[ToolDescription, ...]) -> list[Json]:
        """Chat Completions function tools."""
        return to_openai_tools(tools)

    def _convert(self, step: ConversationStep) -> list[Json]:
        """One conversation step as Chat Completions messages (see the module docstring)."""
        message = step.message
        if message.role == "user":
            return [{"role": "user", "content": message.content}]
        ids = message.tool_call_ids
        if not ids:
            return [{"role": "assistant", "content": message.content}]
        tools = self._tools_view
        calls = {call.id: call for call in step.results}
        tool_calls: list[Json] = []
        results: list[Json] = []
        attachments: list[Json] = []
        for cid in ids:
            call = calls.get(cid)
            name = wire_name(call.tool) if call is not None else UNKNOWN_TOOL
            arguments = call_arguments(call) if call is not None else "{}"
            tool_calls.append(
                {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
            if call is None:
                results.append({"role": "tool", "tool_call_id": cid, "content": NO_RESULT})
                continue
            rendered = render_tool_result(call, tools)
            results.append({"role": "tool", "tool_call_id": cid, "content": rendered.text})
            for media in rendered.media:
                attachments += _media_parts(media, cid)
        assistant: Json = {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": tool_calls,
        }
        if attachments:
            return [assistant, *results, {"role": "user", "content": attachments}]
        return [assistant, *results]


def _media_parts(media: Media, call: str) -> list[Json]:
    """Content parts for one media item: a label, then the content (or why it is missing)."""
    content = read_media(media)
    if content is None:
        return [_text(media_label(media, call, "its content could not be read"))]
    if media.kind == "image":
        part: Json = {"type": "image_url", "image_url": {"url": data_url(media, content)}}
    elif media.kind == "document":
        part = {
            "type": "file",
            "file": {"filename": media.filename, "file_data": data_url(media, content)},
        }
    elif media.kind == "audio" and media.mime_type.split(";")[0].strip() in _AUDIO_FORMATS:
        fmt = _AUDIO_FORMATS[media.mime_type.split(";")[0].strip()]
        encoded = data_url(media, content).partition(",")[2]
        part = {"type": "input_audio", "input_audio": {"data": encoded, "format": fmt}}
    else:
        note = f"not attached: this API takes no {media.mime_type} content"
        return [_text(media_label(media, call, note))]
    return [_text(media_label(media, call)), part]


def _text(text: str) -> Json:
    return {"type": "text", "text": text}


async def _assemble(
    stream: Any,  # AsyncStream[ChatCompletionChunk]; Any: the SDK's stream type is generic noise
    on_text_delta: Callable[[str], None],
) -> Json:
    """Read a streamed completion: pass text on, assemble calls; the completion as plain data."""
    from openai.types.chat import ChatCompletion

    head: Json = {}
    content: list[str] = []
    refusal: list[str] = []
    calls: dict[int, Json] = {}
    finish_reason: str | None = None
    usage: Any = None
    async for chunk in stream:
        chunk = cast("ChatCompletionChunk", chunk)
        if not head:
            head = {
                "id": chunk.id,
                "created": chunk.created,
                "model": chunk.model,
                "object": "chat.completion",
            }
        for name in ("service_tier", "system_fingerprint"):
            value = getattr(chunk, name, None)
            if value is not None:
                head[name] = value
        if chunk.usage is not None:
            usage = chunk.usage.model_dump(mode="json", warnings=False)
        for choice in chunk.choices or ():
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1: the first choice is the answer, as without streaming
            if choice.finish_reason is not None:
                finish_reason = choice.finish_reason
            delta: Any = getattr(choice, "delta", None)  # a lenient server may send none
            if delta is None:
                continue
            if delta.content:
                content.append(delta.content)
                on_text_delta(delta.content)
            if delta.refusal:
                refusal.append(delta.refusal)
            for position, part in enumerate(delta.tool_calls or ()):
                _add_call_delta(calls, part, position)
    message: Json = {
        "role": "assistant",
        "content": "".join(content) if content else None,
        "refusal": "".join(refusal) if refusal else None,
        "tool_calls": [calls[i] for i in sorted(calls)] or None,
    }
    choice_data: Json = {"index": 0, "finish_reason": finish_reason, "message": message}
    completion = {**head, "choices": [choice_data], "usage": usage}
    return ChatCompletion.construct(**completion).model_dump(mode="json", warnings=False)


def _add_call_delta(calls: dict[int, Json], part: Any, position: int) -> None:
    """Merge one tool-call delta into the call it continues (keyed by its index)."""
    index = getattr(part, "index", None)
    index = index if isinstance(index, int) else position
    call = calls.get(index)
    if call is None:
        call = calls[index] = {
            "id": None,
            "type": "function",
            "function": {"name": "", "arguments": ""},
        }
    if getattr(part, "id", None):
        call["id"] = part.id
    function = getattr(part, "function", None)
    if function is None:
        return
    name = function.name
    if name and name != call["function"]["name"]:  # some servers repeat the name in each delta
        call["function"]["name"] += name
    arguments = function.arguments
    if isinstance(arguments, str):
        call["function"]["arguments"] += arguments
    elif arguments is not None:  # an object, from a lenient server: take it whole
        call["function"]["arguments"] = arguments_text(arguments)


def parse_completion(raw: Json, *, provider: str, model: str) -> ModelResponse:
    """A chat completion (as plain data) as a `ModelResponse`.

    Raises:
        ModelRefusalError: the model refused, or the content filter stopped the answer.
    """
    choices = raw.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    finish_reason = choice.get("finish_reason")
    refusal = message.get("refusal")
    if refusal:
        raise ModelRefusalError(str(refusal), provider=provider, model=model)
    if finish_reason == "content_filter":
        raise ModelRefusalError(
            "the provider's content filter stopped the answer", provider=provider, model=model
        )
    calls = []
    for item in message.get("tool_calls") or ():
        function = item.get("function") or {}
        calls.append(
            ProposedToolCall(
                call_id(item.get("id")),
                str(function.get("name") or ""),
                arguments_text(function.get("arguments")),
            )
        )
    usage = raw.get("usage")
    return ModelResponse(
        text=_text_of(message.get("content")),
        tool_calls=tuple(calls),
        usage=Usage(
            int_field(usage, "prompt_tokens"),
            int_field(usage, "completion_tokens"),
            int_field(usage, "prompt_tokens_details", "cached_tokens"),
            int_field(usage, "completion_tokens_details", "reasoning_tokens"),
        ),
        model=raw.get("model") if isinstance(raw.get("model"), str) else None,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        raw=raw,
    )


def _text_of(content: object) -> str | None:
    """Message content as text (some servers send a list of text parts)."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return str(content)


OpenAIChatModel.__module__ = "pipeline.models"
