"""`AnthropicModel` through the real ``anthropic`` SDK client, over a scripted HTTP server.

Responses are recorded in the Messages API's wire format (JSON messages, SSE event streams,
error bodies); the tests assert the exact request bodies loopware sends.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from pydantic import BaseModel

import pipeline.models._anthropic as anthropic_module
from pipeline import (
    Tool,
    ToolLoopExecutor,
    ToolRegistry,
    TurnResult,
    TurnRunner,
    tool,
    tool_call_checksum,
)
from pipeline.artifacts import Media, render_tool_result
from pipeline.calls import ToolCall
from pipeline.errors import ModelAuthenticationError, ModelError, ModelRefusalError
from pipeline.events import ModelTextDelta
from pipeline.models import (
    AnthropicModel,
    Message,
    ModelRequest,
    ModelResponse,
    Usage,
    to_anthropic_tools,
)
from pipeline.models._anthropic_messages import Alternation, convert_step, media_block
from pipeline.stores import MemoryStore

from .conftest import Server

MODEL = "claude-sonnet-4-6"
Serve = Callable[..., Server]


# -- the wire format ---------------------------------------------------------------------------
def message(
    *content: dict[str, Any],
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 6},
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def reply(body: dict[str, Any], status: int = 200, **headers: str) -> httpx2.Response:
    """A JSON response as the API sends it, with its ``request-id`` header."""
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    return httpx2.Response(status, json=body, headers={"request-id": "req_011CTest", **named})


def error(status: int, kind: str, text_: str, **headers: str) -> httpx2.Response:
    """An error response: ``{"type": "error", "error": {"type": ..., "message": ...}}``."""
    body = {"type": "error", "error": {"type": kind, "message": text_}, "request_id": "req_011CErr"}
    return reply(body, status, **headers)


def stream(events: list[dict[str, Any]]) -> httpx2.Response:
    """An SSE response: ``event: <type>`` and ``data: <json>`` per event."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx2.Response(
        200,
        content=body.encode(),
        headers={"content-type": "text/event-stream", "request-id": "req_011CStream"},
    )


def stream_of(body: dict[str, Any], chunks: list[str]) -> list[dict[str, Any]]:
    """The events the API streams for ``body``: text in ``chunks``, tool inputs in two pieces."""
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": text("")}
            )
            deltas = [{"type": "text_delta", "text": c} for c in chunks]
        else:
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            raw = json.dumps(block["input"])
            cut = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in (raw[:cut], raw[cut:])
            ]
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def client(server: Server, *, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    """A real `AsyncAnthropic` whose HTTP goes to ``server``."""
    return anthropic.AsyncAnthropic(
        api_key="sk-ant-test",
        max_retries=max_retries,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(server.handle)),
    )


def model_on(server: Server, *, max_retries: int = 0, **settings: Any) -> AnthropicModel:
    return AnthropicModel(MODEL, client=client(server, max_retries=max_retries), **settings)


def runner(model: AnthropicModel, *tools: Tool[Any], **options: Any) -> TurnRunner:
    parallel = options.pop("parallel", False)
    return TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel), tools=tools, **options
    )


def envelope(tool_name: str, arguments: dict[str, Any], body: str) -> str:
    """What the model reads for an untrusted text result."""
    nonce = tool_call_checksum(tool_name, arguments)
    tag = f"untrusted_content_{nonce}"
    return f'<{tag} nonce="{nonce}" kind="tool-result" tool="{tool_name}">\n{body}\n</{tag}>'


def result_block(call_id: str, content: Any, *, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return {**block, "is_error": True} if is_error else block


def request(*messages: Message, calls: tuple[ToolCall, ...] = (), **options: Any) -> ModelRequest:
    return ModelRequest("Be brief.", messages, calls, (), **options)


# -- requests ----------------------------------------------------------------------------------
async def test_a_plain_answer_sends_the_system_prompt_and_the_user_message(serve: Serve) -> None:
    """A turn without tools sends model, max_tokens, system and one user message, nothing more."""
    server = serve(reply(message(text("Hello!"))))
    result = await runner(model_on(server), system_prompt="Be brief.").run("Hi")
    assert result.status == "completed"
    assert result.output == "Hello!"
    assert server.bodies == [
        {
            "model": MODEL,
            "max_tokens": 4096,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": "Hi"}],
        }
    ]
    assert server.requests[0].url == "https://api.anthropic.com/v1/messages"


async def test_settings_go_with_every_request(serve: Serve) -> None:
    """Constructor settings (stop_sequences, extra_body fields) and max_tokens reach the body."""
    server = serve(reply(message(text("ok"))))
    model = model_on(server, max_tokens=256, stop_sequences=["END"], extra_body={"top_k": 5})
    await model.complete(request(Message(role="user", content="Hi")))
    body = server.bodies[0]
    assert (body["max_tokens"], body["stop_sequences"], body["top_k"]) == (256, ["END"], 5)


async def test_one_tool_call_round_trips_with_its_exact_id(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """The tool_use id comes back as the tool_result id; the result is enveloped; tools sent."""
    server = serve(
        reply(
            message(
                text("Adding."),
                tool_use("toolu_01A", "add", {"a": 2, "b": 3}),
                stop_reason="tool_use",
            )
        ),
        reply(message(text("It is 5."))),
    )
    result = await runner(model_on(server), add_tool).run("What is 2+3?")
    assert result.output == "It is 5."
    assert [c.id for c in result.tool_calls] == ["toolu_01A"]
    first, second = server.bodies
    assert first["tools"] == to_anthropic_tools([add_tool.describe()])
    assert second["messages"] == [
        {"role": "user", "content": "What is 2+3?"},
        {
            "role": "assistant",
            "content": [text("Adding."), tool_use("toolu_01A", "add", {"a": 2, "b": 3})],
        },
        {
            "role": "user",
            "content": [result_block("toolu_01A", envelope("add", {"a": 2, "b": 3}, "5"))],
        },
    ]


async def test_parallel_calls_put_all_results_first_in_one_user_message(
    serve: Serve, add_tool: Tool[BaseModel], echo_tool: Tool[BaseModel]
) -> None:
    """Two tool_use blocks in one assistant message; both results, in order, in the next one."""
    calls = [
        tool_use("toolu_A", "add", {"a": 1, "b": 1}),
        tool_use("toolu_B", "echo", {"text": "hi"}),
    ]
    server = serve(reply(message(*calls, stop_reason="tool_use")), reply(message(text("done"))))
    result = await runner(model_on(server), add_tool, echo_tool, parallel=True).run("go")
    assert result.output == "done"
    assert server.bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": calls},
        {
            "role": "user",
            "content": [
                result_block("toolu_A", envelope("add", {"a": 1, "b": 1}, "2")),
                result_block("toolu_B", envelope("echo", {"text": "hi"}, "hi")),
            ],
        },
    ]


async def test_results_and_the_next_user_input_share_one_user_message(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """A turn cut after its tool call (iteration limit): the next turn's request merges the
    stored results and the new input into one user message, results first (roles alternate)."""
    server = serve(
        reply(message(tool_use("toolu_1", "add", {"a": 1, "b": 2}), stop_reason="tool_use")),
        reply(message(text("3, and hello"))),
    )
    run = runner(model_on(server), add_tool, store=MemoryStore(), max_iterations=1)
    first = await run.run("add 1 and 2", conversation_id="conv-1")
    assert first.status == "failed"
    second = await run.run("and say hello", conversation_id="conv-1")
    assert second.output == "3, and hello"
    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": "add 1 and 2"},
        {"role": "assistant", "content": [tool_use("toolu_1", "add", {"a": 1, "b": 2})]},
        {
            "role": "user",
            "content": [
                result_block("toolu_1", envelope("add", {"a": 1, "b": 2}, "3")),
                text("and say hello"),
            ],
        },
    ]


async def test_an_input_that_fails_the_schema_becomes_an_error_result_the_model_sees(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """A tool_use whose input fails validation is stored as an error call and sent back with
    ``is_error: true`` under its id; the turn goes on."""
    server = serve(
        reply(message(tool_use("toolu_bad", "add", {"a": "two", "b": 3}), stop_reason="tool_use")),
        reply(message(text("Sorry, fixed."))),
    )
    result = await runner(model_on(server), add_tool).run("add two and 3")
    assert result.output == "Sorry, fixed."
    [call] = result.tool_calls
    assert call.is_error
    sent = server.bodies[1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [tool_use("toolu_bad", "add", dict(call.args))],
    }
    [block] = sent[2]["content"]
    assert block["tool_use_id"] == "toolu_bad"
    assert block["is_error"] is True
    assert "E_INVALID_TOOL_ARGS" in block["content"]
    assert block["content"].startswith("<untrusted_content_")


async def test_a_multi_iteration_turn_carries_every_enveloped_result(
    serve: Serve, add_tool: Tool[BaseModel], echo_tool: Tool[BaseModel]
) -> None:
    """Three requests: the third carries both earlier steps, each result under its call's id."""
    server = serve(
        reply(message(tool_use("toolu_1", "add", {"a": 1, "b": 2}), stop_reason="tool_use")),
        reply(
            message(
                text("Now echo."),
                tool_use("toolu_2", "echo", {"text": "3"}),
                stop_reason="tool_use",
            )
        ),
        reply(message(text("3"))),
    )
    result = await runner(model_on(server), add_tool, echo_tool).run("go")
    assert result.output == "3"
    assert server.bodies[2]["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("toolu_1", "add", {"a": 1, "b": 2})]},
        {
            "role": "user",
            "content": [result_block("toolu_1", envelope("add", {"a": 1, "b": 2}, "3"))],
        },
        {
            "role": "assistant",
            "content": [text("Now echo."), tool_use("toolu_2", "echo", {"text": "3"})],
        },
        {
            "role": "user",
            "content": [result_block("toolu_2", envelope("echo", {"text": "3"}, "3"))],
        },
    ]
    assert server.bodies[1]["messages"] == server.bodies[2]["messages"][:3]


async def test_an_image_result_is_sent_as_a_base64_image_block(serve: Serve) -> None:
    """Media results go inside the tool_result: the placeholder text, then an image block."""
    png = b"\x89PNG\r\n\x1a\nfake-image-bytes"

    @tool
    def chart() -> Media:
        """Draw the chart."""
        return Media.tool_generated("image", "image/png", "chart.png", png)

    server = serve(
        reply(message(tool_use("toolu_img", "chart", {}), stop_reason="tool_use")),
        reply(message(text("A chart."))),
    )
    result = await runner(model_on(server), chart).run("draw")
    assert result.output == "A chart."
    rendered = render_tool_result(result.tool_calls[0], ToolRegistry([chart]))
    assert server.bodies[1]["messages"][2] == {
        "role": "user",
        "content": [
            result_block(
                "toolu_img",
                [
                    text(rendered.text),
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": base64.b64encode(png).decode(),
                        },
                    },
                ],
            )
        ],
    }
    assert 'kind="trusted-media"' in rendered.text


MEDIA = {
    "jpeg": (
        Media.retrieved_public("image", "image/JPEG", "a.jpg", b"jpg"),
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "anBn"}},
    ),
    "pdf": (
        Media.retrieved_public("document", "application/pdf", "r.pdf", b"%PDF"),
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="},
            "title": "r.pdf",
        },
    ),
    "text": (
        Media.retrieved_public("document", "text/markdown; charset=utf-8", "n.md", b"# hi"),
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "# hi"},
            "title": "n.md",
        },
    ),
}


@pytest.mark.parametrize("name", list(MEDIA), ids=list(MEDIA))
def test_media_kinds_the_api_takes_become_image_or_document_blocks(name: str) -> None:
    """JPEG/PNG/GIF/WebP images are image blocks; PDF and text documents are document blocks."""
    item, block = MEDIA[name]
    assert media_block(item) == block


@pytest.mark.parametrize(
    "item",
    [
        Media.retrieved_public("audio", "audio/wav", "a.wav", b"RIFF"),
        Media.retrieved_public("image", "image/svg+xml", "a.svg", b"<svg/>"),
        Media.retrieved_public("document", "application/msword", "a.doc", b"doc"),
    ],
    ids=["audio", "svg", "word"],
)
def test_media_the_api_cannot_take_is_named_in_a_text_block(item: Media) -> None:
    """Other media are not attached; a text block tells the model which and why."""
    block = media_block(item)
    assert block["type"] == "text"
    assert item.id in block["text"]
    assert "is not attached" in block["text"]


async def test_an_announced_call_without_a_record_still_gets_an_error_result(serve: Serve) -> None:
    """An assistant message whose call has no stored record gets an error tool_result, or the
    API would refuse the conversation; a stored name the API would refuse is replaced."""
    server = serve(reply(message(text("ok"))))
    model = model_on(server)
    stored = ToolCall.completed(id="toolu_ok", tool="echo", args={"text": "x"}, results="x")
    unnamed = ToolCall.completed(
        id="toolu_anon", tool="(unnamed)", args={}, results="Error: no tool name.", is_error=True
    )
    ids = ("toolu_ok", "toolu_lost", "toolu_anon")
    history = (
        Message(role="user", content="go"),
        Message(role="assistant", content="", tool_call_ids=ids),
        Message(role="user", content="again"),
    )
    await model.complete(request(*history, calls=(stored, unnamed)))
    assert server.bodies[0]["messages"] == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                tool_use("toolu_ok", "echo", {"text": "x"}),
                tool_use("toolu_lost", "unknown_tool", {}),
                tool_use("toolu_anon", "unknown_tool", {}),
            ],
        },
        {
            "role": "user",
            "content": [
                result_block("toolu_ok", envelope("echo", {"text": "x"}, "x")),
                result_block(
                    "toolu_lost", "Error: no result was recorded for this call.", is_error=True
                ),
                result_block(
                    "toolu_anon", envelope("(unnamed)", {}, "Error: no tool name."), is_error=True
                ),
                text("again"),
            ],
        },
    ]


# -- responses ---------------------------------------------------------------------------------
async def test_the_response_carries_usage_model_finish_reason_and_raw(serve: Serve) -> None:
    """Thinking stays out of the text (kept in raw); usage counts the whole prompt."""
    body = message(
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
        text("Hel"),
        text("lo"),
        tool_use("toolu_1", "echo", {"text": "é"}),
        stop_reason="tool_use",
        usage={
            "input_tokens": 100,
            "output_tokens": 40,
            "cache_read_input_tokens": 900,
            "cache_creation_input_tokens": 50,
            "output_tokens_details": {"thinking_tokens": 25},
        },
    )
    response = await model_on(serve(reply(body))).complete(
        request(Message(role="user", content="x"))
    )
    assert response.text == "Hello"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("toolu_1", "echo", {"text": "é"})
    ]
    assert response.usage == Usage(1050, 40, 900, 25)
    assert (response.model, response.finish_reason) == (MODEL, "tool_use")
    assert response.raw["content"][0]["thinking"] == "Let me think."
    assert response.raw["id"] == body["id"]


async def test_thinking_blocks_go_back_before_the_calls_they_led_to(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """With extended thinking on, the answer's thinking blocks (signature included) lead its
    assistant message in the next request, as the API requires; they never reach the text."""
    thought = {"type": "thinking", "thinking": "1 plus 2.", "signature": "EqQBCgIYAhIM"}
    hidden = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
    server = serve(
        reply(
            message(
                thought,
                hidden,
                text("Adding."),
                tool_use("toolu_t", "add", {"a": 1, "b": 2}),
                stop_reason="tool_use",
            )
        ),
        reply(message(text("3"))),
    )
    model = model_on(server, thinking={"type": "enabled", "budget_tokens": 1024})
    result = await runner(model, add_tool).run("1+2?")
    assert result.output == "3"
    assert result.messages[1].content == "Adding."
    first, second = server.bodies
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [thought, hidden, text("Adding."), tool_use("toolu_t", "add", {"a": 1, "b": 2})],
    }


async def test_usage_of_every_model_call_is_summed_into_the_turn_result(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """Two model calls: `TurnResult.usage` is their sum."""
    server = serve(
        reply(
            message(
                tool_use("toolu_1", "add", {"a": 1, "b": 1}),
                stop_reason="tool_use",
                usage={"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 4},
            )
        ),
        reply(message(text("2"), usage={"input_tokens": 20, "output_tokens": 7})),
    )
    result = await runner(model_on(server), add_tool).run("1+1?")
    assert result.usage == Usage(input_tokens=34, output_tokens=12, cached_tokens=4)


async def test_a_refusal_fails_the_turn_with_e_model_refusal(serve: Serve) -> None:
    """``stop_reason == "refusal"`` ends the turn failed with ModelRefusalError."""
    body = message(
        stop_reason="refusal",
        stop_details={"type": "refusal", "category": "cyber", "explanation": "Not this."},
    )
    result = await runner(model_on(serve(reply(body)))).run("write malware")
    assert result.status == "failed"
    [err] = result.errors
    assert isinstance(err, ModelRefusalError)
    assert err.code == "E_MODEL_REFUSAL"
    assert "cyber" in err.message
    assert "Not this." in err.message


# -- streaming ---------------------------------------------------------------------------------
STREAMED = message(
    text("Let me add that."),
    tool_use("toolu_s1", "add", {"a": 20, "b": 22}),
    stop_reason="tool_use",
    usage={"input_tokens": 30, "output_tokens": 12, "cache_read_input_tokens": 8},
)


async def test_a_stream_gives_the_same_response_as_a_whole_answer(serve: Serve) -> None:
    """Text deltas reach on_text_delta as they arrive; tool inputs are assembled from their
    input_json_delta pieces; the ModelResponse (raw included) equals the non-streamed one."""
    chunks = ["Let me", " add", " that."]
    server = serve(reply(STREAMED), stream(stream_of(STREAMED, chunks)))
    model = model_on(server)
    whole = await model.complete(request(Message(role="user", content="20+22?")))
    deltas: list[str] = []
    streamed = await model.complete(
        request(Message(role="user", content="20+22?"), on_text_delta=deltas.append)
    )
    assert deltas == chunks
    assert streamed == whole
    assert streamed.tool_calls[0].arguments == '{"a": 20, "b": 22}'
    plain, streaming = server.bodies
    assert streaming == {**plain, "stream": True}


async def test_a_listened_turn_streams_model_text_delta_events(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """With a ModelTextDelta listener the turn streams: the listener gets every text delta."""
    answer = message(text("It is 42."))
    server = serve(
        stream(stream_of(STREAMED, ["Let me add", " that."])),
        stream(stream_of(answer, ["It is", " 42."])),
    )
    run = runner(model_on(server), add_tool)
    events: list[ModelTextDelta] = []
    run.on(ModelTextDelta, events.append)
    result = await run.run("20+22?")
    assert result.output == "It is 42."
    assert [(e.iteration, e.text) for e in events] == [
        (0, "Let me add"),
        (0, " that."),
        (1, "It is"),
        (1, " 42."),
    ]
    [call] = result.tool_calls
    assert (call.id, dict(call.args)) == ("toolu_s1", {"a": 20, "b": 22})
    assert all(body["stream"] is True for body in server.bodies)
    assert result.usage == Usage(30 + 8 + 12, 12 + 6, 8)


async def test_an_error_event_in_the_stream_maps_by_its_type(serve: Serve) -> None:
    """An ``overloaded_error`` sent mid-stream ends the turn with E_MODEL_UNAVAILABLE."""
    events = stream_of(message(text("Hi")), ["H"])[:4]
    events.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    model = model_on(serve(stream(events)))
    with pytest.raises(ModelError) as caught:
        await model.complete(request(Message(role="user", content="x"), on_text_delta=print))
    assert caught.value.code == "E_MODEL_UNAVAILABLE"
    assert caught.value.status_code is None
    assert isinstance(caught.value.__cause__, anthropic.APIStatusError)


# -- failures ----------------------------------------------------------------------------------
async def test_a_429_is_retried_by_the_sdk_then_succeeds(serve: Serve) -> None:
    """The SDK's own retry (max_retries=1) gets through after a 429; no second retry loop."""
    server = serve(
        error(429, "rate_limit_error", "Number of requests exceeded", retry_after_ms="1"),
        reply(message(text("Finally."))),
    )
    result = await runner(model_on(server, max_retries=1)).run("hi")
    assert result.output == "Finally."
    assert len(server.requests) == 2


async def test_a_401_fails_the_turn_cleanly_and_keeps_stored_records(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """The second model call is refused (401): the turn fails with E_MODEL_AUTHENTICATION, the
    call stored before it stays stored."""
    store = MemoryStore()
    server = serve(
        reply(message(tool_use("toolu_1", "add", {"a": 1, "b": 2}), stop_reason="tool_use")),
        error(401, "authentication_error", "invalid x-api-key"),
    )
    result = await runner(model_on(server, max_retries=2), add_tool, store=store).run(
        "1+2", conversation_id="c-401"
    )
    assert result.status == "failed"
    [err] = result.errors
    assert isinstance(err, ModelAuthenticationError)
    assert (err.code, err.provider, err.model) == ("E_MODEL_AUTHENTICATION", "anthropic", MODEL)
    assert (err.status_code, err.request_id) == (401, "req_011CTest")
    assert isinstance(err.__cause__, anthropic.AuthenticationError)
    assert len(server.requests) == 2  # a 401 is not retried
    messages, calls = await store.load_conversation("c-401")
    assert [c.id for c in calls] == ["toolu_1"]
    assert [c.id for c in result.tool_calls] == ["toolu_1"]
    assert [m.role for m in messages] == ["user", "assistant"]


PROMPT_TOO_LONG = "prompt is too long: 208310 tokens > 200000 maximum"
FAILURES: dict[str, tuple[list[httpx2.Response], str, int | None]] = {
    "prompt-too-long": (
        [error(400, "invalid_request_error", PROMPT_TOO_LONG)],
        "E_MODEL_CONTEXT_LENGTH",
        400,
    ),
    "bad-request": (
        [error(400, "invalid_request_error", "messages: roles must alternate")],
        "E_MODEL_BAD_REQUEST",
        400,
    ),
    "too-large": (
        [error(413, "request_too_large", "Request exceeds the maximum size")],
        "E_MODEL_CONTEXT_LENGTH",
        413,
    ),
    "permission": ([error(403, "permission_error", "no access")], "E_MODEL_AUTHENTICATION", 403),
    "not-found": (
        [error(404, "not_found_error", "model: claude-nope")],
        "E_MODEL_BAD_REQUEST",
        404,
    ),
    "rate-limited": (
        [error(429, "rate_limit_error", "slow down", retry_after_ms="1") for _ in range(2)],
        "E_MODEL_RATE_LIMITED",
        429,
    ),
    "overloaded": (
        [error(529, "overloaded_error", "Overloaded", retry_after_ms="1") for _ in range(2)],
        "E_MODEL_UNAVAILABLE",
        529,
    ),
    "server-error": (
        [error(500, "api_error", "Internal server error", retry_after_ms="1") for _ in range(2)],
        "E_MODEL_UNAVAILABLE",
        500,
    ),
    "gateway-timeout": (
        [error(504, "timeout_error", "timed out", retry_after_ms="1") for _ in range(2)],
        "E_MODEL_TIMEOUT",
        504,
    ),
}


@pytest.mark.parametrize("case", list(FAILURES), ids=list(FAILURES))
async def test_provider_errors_map_to_stable_codes_after_the_sdk_retries(
    serve: Serve, case: str
) -> None:
    """Each HTTP failure ends the turn failed with its ModelError code, status and request id,
    after the SDK's own retries (max_retries=1: retryable statuses are asked twice)."""
    replies, code, status = FAILURES[case]
    server = serve(*replies)
    result = await runner(model_on(server, max_retries=1)).run("hi")
    assert result.status == "failed"
    [err] = result.errors
    assert isinstance(err, ModelError)
    assert (err.code, err.status_code, err.provider) == (code, status, "anthropic")
    assert err.request_id == "req_011CTest"
    assert isinstance(err.__cause__, anthropic.APIStatusError)
    assert len(server.requests) == len(replies)


def _connect_error(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ConnectError("connection refused", request=request)


def _read_timeout(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("read timed out", request=request)


@pytest.mark.parametrize(
    ("fail", "code"),
    [(_connect_error, "E_MODEL_UNAVAILABLE"), (_read_timeout, "E_MODEL_TIMEOUT")],
    ids=["connection", "timeout"],
)
async def test_connection_failures_and_timeouts_after_retries(
    serve: Serve, fail: Callable[[httpx2.Request], httpx2.Response], code: str
) -> None:
    """No answer at all: unavailable (connection) or timeout, once the SDK's retries are spent."""
    server = serve(fail, fail)
    with pytest.raises(ModelError) as caught:
        await model_on(server, max_retries=1).complete(request(Message(role="user", content="x")))
    assert caught.value.code == code
    assert isinstance(caught.value.__cause__, anthropic.APIConnectionError)
    assert len(server.requests) == 2


# -- incremental conversion --------------------------------------------------------------------
async def test_a_long_turn_converts_each_message_once(
    serve: Serve, echo_tool: Tool[BaseModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve iterations: every request is the whole conversation, yet each message is converted
    once (the converted prefix is kept per turn, only what is new is converted)."""
    steps = 12
    replies = [
        reply(message(tool_use(f"toolu_{i}", "echo", {"text": f"t{i}"}), stop_reason="tool_use"))
        for i in range(steps)
    ]
    server = serve(*replies, reply(message(text("done"))))
    converted: list[Message] = []

    def counting(step: Any, *rest: Any) -> Any:
        converted.append(step.message)
        return convert_step(step, *rest)

    monkeypatch.setattr(anthropic_module, "convert_step", counting)
    result: TurnResult = await runner(model_on(server), echo_tool).run("go")
    assert result.output == "done"
    assert len(converted) == len(result.messages) - 1 == steps + 1  # not the final answer
    expected: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, body in enumerate(server.bodies):
        assert body["messages"] == expected
        expected = [
            *expected,
            {"role": "assistant", "content": [tool_use(f"toolu_{i}", "echo", {"text": f"t{i}"})]},
            {
                "role": "user",
                "content": [
                    result_block(f"toolu_{i}", envelope("echo", {"text": f"t{i}"}, f"t{i}"))
                ],
            },
        ]


def test_merging_keeps_each_turns_merged_prefix_and_starts_over_when_it_changed() -> None:
    """Merging roles is incremental per turn (a message arriving later joins the last one);
    when the converted prefix is no longer the same objects, the turn is merged anew."""
    merged = Alternation()
    user, results, more = (
        {"role": "user", "content": "go"},
        {"role": "user", "content": [result_block("toolu_1", "x")]},
        {"role": "user", "content": "and more"},
    )
    answer = {"role": "assistant", "content": [tool_use("toolu_1", "echo", {})]}
    assert merged.messages("t", [user, answer, results]) == [user, answer, results]
    assert merged.messages("t", [user, answer, results, more]) == [
        user,
        answer,
        {"role": "user", "content": [result_block("toolu_1", "x"), text("and more")]},
    ]
    assert results == {"role": "user", "content": [result_block("toolu_1", "x")]}  # unchanged
    again = [dict(user), dict(more)]  # converted again from the start: new objects
    assert merged.messages("t", again) == [
        {"role": "user", "content": [text("go"), text("and more")]}
    ]
    assert merged.messages(None, [user, more]) == merged.messages("t", again)


# -- construction ------------------------------------------------------------------------------
@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """An environment where the SDK finds no Anthropic credentials at all."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
        "ANTHROPIC_FEDERATION_RULE_ID",
        "ANTHROPIC_ORGANIZATION_ID",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk either


@pytest.mark.usefixtures("no_credentials")
def test_a_missing_api_key_names_the_variable_to_set() -> None:
    """Without a key, building the model raises ModelAuthenticationError naming the variable."""
    with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY") as caught:
        AnthropicModel(MODEL)
    assert (caught.value.provider, caught.value.model) == ("anthropic", MODEL)


@pytest.mark.usefixtures("no_credentials")
def test_unloadable_credentials_also_name_the_variable_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A config dir without the profile the SDK looks for: the same error, the cause chained."""
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY") as caught:
        AnthropicModel(MODEL)
    assert isinstance(caught.value.__cause__, anthropic.CredentialsError)


@pytest.mark.usefixtures("no_credentials")
def test_the_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without client=, the SDK's usual variables configure the client it builds."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:9999")
    model = AnthropicModel(MODEL, max_retries=5)
    assert model.client.api_key == "sk-ant-env"
    assert str(model.client.base_url).rstrip("/") == "http://localhost:9999"
    assert model.client.max_retries == 5
    assert repr(model) == f"AnthropicModel({MODEL!r}, max_tokens=4096)"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"model": ""}, ValueError),
        ({"max_tokens": 0}, ValueError),
        ({"system": "x"}, TypeError),
        ({"temperature": 0.2}, TypeError),
        ({"client": "set below", "api_key": "k"}, TypeError),
    ],
    ids=["empty-model", "max-tokens", "reserved-setting", "unknown-setting", "client-and-key"],
)
def test_bad_arguments_are_refused(
    serve: Serve, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """An empty model, a bad max_tokens, a setting the model sets itself or that the SDK's
    messages.create does not take (this SDK has no ``temperature``), client with a key."""
    arguments: dict[str, Any] = {"model": MODEL, **kwargs}
    if "client" in kwargs:
        arguments["client"] = client(serve())
    with pytest.raises(error):
        AnthropicModel(**arguments)


def test_importing_pipeline_does_not_import_the_sdk() -> None:
    """``import pipeline`` (and building the top level) loads neither anthropic nor httpx2."""
    code = (
        "import sys, pipeline, pipeline.models\n"
        "print('anthropic' in sys.modules, 'httpx2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_model_reports_the_public_module() -> None:
    """`AnthropicModel` shows as ``pipeline.models.AnthropicModel``, its public module."""
    assert AnthropicModel.__module__ == "pipeline.models"
    assert ModelResponse.__module__ == "pipeline.models"
