"""`OpenAIChatModel` through the real `openai` SDK over a MockTransport: the exact request
bodies loopware sends, the responses it reads (recorded in the Chat Completions wire format),
streaming, provider errors, and OpenAI-compatible servers' quirks."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from pydantic import BaseModel

from pipeline import Tool, TurnRunner, tool, tool_call_checksum
from pipeline.artifacts import Media, SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelRefusalError,
)
from pipeline.events import ModelTextDelta
from pipeline.models import ModelRequest, OpenAIChatModel, Usage
from pipeline.stores import MemoryStore

from .conftest import Server, error_body, json_reply, sse_reply

Serve = Callable[..., Server]
MODEL = "gpt-4o-mini"
ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "additionalProperties": False,
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"title": "B", "type": "integer"},
            },
            "required": ["a", "b"],
            "title": "add",
            "type": "object",
        },
    },
}


def completion(
    message: dict[str, Any],
    finish_reason: str = "stop",
    *,
    prompt: int = 20,
    out: int = 5,
    cached: int = 0,
    reasoning: int = 0,
) -> dict[str, Any]:
    """A chat.completion body as the API returns it."""
    return {
        "id": "chatcmpl-BNs0Yk3bcL8aRY4q5Oszl9JxeU3Lm",
        "object": "chat.completion",
        "created": 1744917292,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": out,
            "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_0392822090",
    }


def answer(text: str, **usage: int) -> httpx2.Response:
    return json_reply(completion({"content": text}, "stop", **usage))


def calls(*specs: tuple[str, str, str], **usage: int) -> httpx2.Response:
    """A completion proposing tool calls, each ``(id, name, arguments text)``."""
    tool_calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        for cid, name, args in specs
    ]
    return json_reply(
        completion({"content": None, "tool_calls": tool_calls}, "tool_calls", **usage)
    )


def envelope(tool_name: str, args: dict[str, Any], body: str, *, kind: str = "tool-result") -> str:
    """The untrusted envelope the model reads for a call (its nonce is the checksum)."""
    nonce = tool_call_checksum(tool_name, args)
    tag = f"untrusted_content_{nonce}"
    return f'<{tag} nonce="{nonce}" kind="{kind}" tool="{tool_name}">\n{body}\n</{tag}>'


def assistant_calls(*specs: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in specs
        ],
    }


def text_of(call: ToolCall) -> str:
    """A small result is kept inline as the plain string; a large one is an artifact."""
    results = call.results
    if isinstance(results, SpooledArtifact):
        return results.as_string()
    assert isinstance(results, str)
    return results


def runner_for(server: Server, tools: list[Tool[BaseModel]], **settings: Any) -> TurnRunner:
    model = OpenAIChatModel(MODEL, client=server.client(), **settings)
    return TurnRunner(model=model, tools=tools, system_prompt="Be brief.")


SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "What is 1+2?"}


async def test_plain_text_answer_sends_system_user_and_reads_text_usage_model(
    serve: Serve,
) -> None:
    """A plain answer: the body is model + system + user (no tools key), the text is the
    output, and usage, model and finish reason come from the completion."""
    server = serve(answer("Hello!", prompt=9, out=3, cached=4))
    runner = runner_for(server, [])
    result = await runner.run("What is 1+2?")
    assert result.output == "Hello!"
    assert server.bodies == [{"model": MODEL, "messages": [SYSTEM, USER]}]
    assert server.requests[0].url == "https://api.openai.com/v1/chat/completions"
    assert result.usage == Usage(9, 3, 4, 0)


async def test_one_tool_call_then_answer_sends_the_enveloped_result_with_its_id(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """The second request carries the assistant's call (exact id, compact arguments) and a
    tool message with the enveloped result; usage of both calls is summed in the result."""
    server = serve(
        calls(("call_Qx1", "add", '{"a": 1, "b": 2}'), prompt=50, out=10, reasoning=4),
        answer("3", prompt=70, out=2, cached=40),
    )
    result = await runner_for(server, [add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.output == "3"
    first, second = server.bodies
    assert first == {"model": MODEL, "messages": [SYSTEM, USER], "tools": [ADD_TOOL]}
    assert second == {
        "model": MODEL,
        "messages": [
            SYSTEM,
            USER,
            assistant_calls(("call_Qx1", "add", '{"a":1,"b":2}')),
            {
                "role": "tool",
                "tool_call_id": "call_Qx1",
                "content": envelope("add", {"a": 1, "b": 2}, "3"),
            },
        ],
        "tools": [ADD_TOOL],
    }
    assert [c.id for c in result.tool_calls] == ["call_Qx1"]
    assert result.usage == Usage(120, 12, 40, 4)


async def test_parallel_tool_calls_keep_their_order_and_ids(
    serve: Serve, add_tool: Tool[BaseModel], echo_tool: Tool[BaseModel]
) -> None:
    """Two calls proposed together: one assistant message with both, then one tool message
    per call in the same order; the ``parallel_tool_calls`` setting is passed through."""
    server = serve(
        calls(("call_A", "add", '{"a":2,"b":3}'), ("call_B", "echo", '{"text":"hi"}')),
        answer("5 and hi"),
    )
    runner = runner_for(server, [add_tool, echo_tool], parallel_tool_calls=True)
    result = await runner.run("What is 1+2?")
    assert result.ok
    first, second = server.bodies
    assert first["parallel_tool_calls"] is True
    assert second["messages"][2:] == [
        assistant_calls(("call_A", "add", '{"a":2,"b":3}'), ("call_B", "echo", '{"text":"hi"}')),
        {
            "role": "tool",
            "tool_call_id": "call_A",
            "content": envelope("add", {"a": 2, "b": 3}, "5"),
        },
        {
            "role": "tool",
            "tool_call_id": "call_B",
            "content": envelope("echo", {"text": "hi"}, "hi"),
        },
    ]


async def test_invalid_json_arguments_become_an_error_the_model_reads(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """Arguments that are not JSON never reach the tool: the model reads the error on the
    next request, and its call is shown with the text it sent (``unparsed_args``), not ``{}``."""
    server = serve(calls(("call_bad", "add", '{"a": 1,')), answer("sorry"))
    result = await runner_for(server, [add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.tool_calls[0].is_error
    assert result.tool_calls[0].unparsed_args == '{"a": 1,'
    error = (
        "Error: E_INVALID_TOOL_ARGS: the arguments for 'add' are not valid JSON "
        "(Expecting property name enclosed "
        "in double quotes at line 1 column 9); send a JSON object."
    )
    assert server.bodies[1]["messages"][2:] == [
        assistant_calls(("call_bad", "add", '{"a": 1,')),
        {"role": "tool", "tool_call_id": "call_bad", "content": envelope("add", {}, error)},
    ]


async def test_a_multi_iteration_turn_extends_the_previous_request(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """Three model calls: each request is the previous one plus the new step, with the
    results of every iteration under their own ids."""
    server = serve(
        calls(("call_1", "add", '{"a":1,"b":2}')),
        calls(("call_2", "add", '{"a":3,"b":4}')),
        answer("3 then 7"),
    )
    result = await runner_for(server, [add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.iterations == 3
    bodies = server.bodies
    assert bodies[2]["messages"][: len(bodies[1]["messages"])] == bodies[1]["messages"]
    assert bodies[2]["messages"][2:] == [
        assistant_calls(("call_1", "add", '{"a":1,"b":2}')),
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": envelope("add", {"a": 1, "b": 2}, "3"),
        },
        assistant_calls(("call_2", "add", '{"a":3,"b":4}')),
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": envelope("add", {"a": 3, "b": 4}, "7"),
        },
    ]


async def test_history_from_an_earlier_turn_is_sent_before_the_new_input(serve: Serve) -> None:
    """A conversation's second turn starts with the first turn's messages."""
    server = serve(answer("Hi Ann."), answer("Ann."))
    runner = TurnRunner(model=OpenAIChatModel(MODEL, client=server.client()), store=MemoryStore())
    await runner.run("I am Ann.", conversation_id="c1")
    await runner.run("Who am I?", conversation_id="c1")
    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": "I am Ann."},
        {"role": "assistant", "content": "Hi Ann."},
        {"role": "user", "content": "Who am I?"},
    ]


PNG = b"\x89PNG\r\n\x1a\n fake image bytes"


async def test_an_image_result_follows_the_tool_messages_as_a_user_image_part(
    serve: Serve,
) -> None:
    """Tool messages take text only: the envelope names the media, and a user message after
    the tool messages carries a label and the image as a base64 data URL."""

    @tool
    def chart() -> Media:
        """Draw the chart."""
        return Media.tool_generated("image", "image/png", "chart.png", PNG)

    server = serve(calls(("call_img", "chart", "{}")), answer("A chart."))
    result = await runner_for(server, [chart]).run("What is 1+2?")
    assert result.ok
    media = result.tool_calls[0].results
    assert isinstance(media, Media)
    nonce = tool_call_checksum("chart", {})
    tag = f"trusted_content_{nonce}"
    placeholder = (
        f'[image 1 of 1: "chart.png" (image/png, {len(PNG)} bytes); trust tier first-party; '
        f"modality hazard opaque-perceptual; media id {media.id}; the content is attached "
        "separately]"
    )
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert server.bodies[1]["messages"][2:] == [
        assistant_calls(("call_img", "chart", "{}")),
        {
            "role": "tool",
            "tool_call_id": "call_img",
            "content": f'<{tag} nonce="{nonce}" kind="trusted-media" tool="chart">\n'
            f"{placeholder}\n</{tag}>",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": f'[attachment: media id {media.id} (image, "chart.png") from tool '
                    "call call_img; its trust tier is given in that call's result]",
                },
                {"type": "image_url", "image_url": {"url": url}},
            ],
        },
    ]


async def test_a_document_result_is_sent_as_a_file_part(serve: Serve) -> None:
    """A document travels as a ``file`` part with its filename and a data URL."""

    @tool
    def report() -> Media:
        """Fetch the report."""
        return Media.retrieved_public("document", "application/pdf", "r.pdf", b"%PDF-1.4")

    server = serve(calls(("call_doc", "report", "{}")), answer("Read."))
    assert (await runner_for(server, [report]).run("go")).ok
    parts = server.bodies[1]["messages"][-1]["content"]
    assert parts[1] == {
        "type": "file",
        "file": {
            "filename": "r.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode(),
        },
    }


async def test_429_then_success_is_retried_by_the_sdk(serve: Serve) -> None:
    """A rate limit the SDK's own retry gets past: two HTTP requests, one answer."""
    limited = json_reply(
        error_body("Rate limit reached for gpt-4o-mini.", "tokens", "rate_limit_exceeded"),
        429,
        retry_after_ms="1",
    )
    server = serve(limited, answer("ok"))
    model = OpenAIChatModel(MODEL, client=server.client(max_retries=1))
    result = await TurnRunner(model=model).run("hi")
    assert result.output == "ok"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert server.bodies[0] == server.bodies[1]


async def test_401_fails_the_turn_with_the_authentication_code_and_keeps_stored_calls(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """A refused key mid-turn: the turn fails with E_MODEL_AUTHENTICATION (fatal, with the
    provider, model, status and request id); the call stored before stays stored."""
    refused = json_reply(
        error_body(
            "Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"
        ),
        401,
    )
    server = serve(calls(("call_1", "add", '{"a":1,"b":2}')), refused)
    store = MemoryStore()
    model = OpenAIChatModel(MODEL, client=server.client())
    runner = TurnRunner(model=model, tools=[add_tool], store=store)
    result = await runner.run("What is 1+2?", conversation_id="conv")
    assert result.status == "failed"
    (error,) = result.errors
    assert isinstance(error, ModelAuthenticationError)
    assert (error.code, error.fatal, error.status_code) == ("E_MODEL_AUTHENTICATION", True, 401)
    assert (error.provider, error.model, error.request_id) == ("openai", MODEL, "req_test123")
    assert isinstance(error.__cause__, openai.AuthenticationError)
    assert error.__cause__.code == "invalid_api_key"
    _, stored = await store.load_conversation("conv")
    assert [c.id for c in stored] == ["call_1"] == [c.id for c in result.tool_calls]


async def test_400_context_length_maps_to_its_own_code(serve: Serve) -> None:
    """OpenAI's ``context_length_exceeded`` is E_MODEL_CONTEXT_LENGTH (a bad request)."""
    too_long = json_reply(
        error_body(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130017 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        400,
    )
    server = serve(too_long)
    result = await TurnRunner(model=OpenAIChatModel(MODEL, client=server.client())).run("hi")
    (error,) = result.errors
    assert isinstance(error, ModelContextLengthError)
    assert isinstance(error, ModelBadRequestError)
    assert (error.code, error.status_code) == ("E_MODEL_CONTEXT_LENGTH", 400)


def _raise(exc: Exception) -> Callable[[httpx2.Request], httpx2.Response]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise exc

    return handler


STATUS_CASES = {
    "403": (403, "permission_denied", "E_MODEL_AUTHENTICATION"),
    "404": (404, "model_not_found", "E_MODEL_BAD_REQUEST"),
    "400": (400, "invalid_value", "E_MODEL_BAD_REQUEST"),
    "422": (422, None, "E_MODEL_BAD_REQUEST"),
    "429": (429, "insufficient_quota", "E_MODEL_RATE_LIMITED"),
    "500": (500, "server_error", "E_MODEL_UNAVAILABLE"),
    "503": (503, None, "E_MODEL_UNAVAILABLE"),
}


@pytest.mark.parametrize("case", list(STATUS_CASES.values()), ids=list(STATUS_CASES))
async def test_provider_status_errors_map_to_stable_codes(
    serve: Serve, case: tuple[int, str | None, str]
) -> None:
    """Each HTTP failure (after the SDK's retries, here none) has its stable code."""
    status, code, expected = case
    server = serve(json_reply(error_body("nope", "error", code), status))
    model = OpenAIChatModel(MODEL, client=server.client())
    result = await TurnRunner(model=model).run("hi")
    assert result.status == "failed"
    assert [(e.code, getattr(e, "status_code", None)) for e in result.errors] == [
        (expected, status)
    ]


TRANSPORT_CASES = {
    "timeout": (httpx2.ReadTimeout("slow"), "E_MODEL_TIMEOUT"),
    "connection": (httpx2.ConnectError("refused"), "E_MODEL_UNAVAILABLE"),
}


@pytest.mark.parametrize("case", list(TRANSPORT_CASES.values()), ids=list(TRANSPORT_CASES))
async def test_timeouts_and_connection_failures_map_to_stable_codes(
    serve: Serve, case: tuple[Exception, str]
) -> None:
    """A timeout is E_MODEL_TIMEOUT, an unreachable server E_MODEL_UNAVAILABLE."""
    exc, expected = case
    server = serve(_raise(exc))
    result = await TurnRunner(model=OpenAIChatModel(MODEL, client=server.client())).run("hi")
    assert [e.code for e in result.errors] == [expected]


@pytest.mark.parametrize(
    "message",
    [
        {"content": None, "refusal": "I can't help with that."},
        {"content": "partial"},
    ],
    ids=["refusal", "content-filter"],
)
async def test_refusals_and_content_filter_raise_model_refusal(
    serve: Serve, message: dict[str, Any]
) -> None:
    """A refusal message or a ``content_filter`` finish is E_MODEL_REFUSAL."""
    finish = "stop" if message.get("refusal") else "content_filter"
    server = serve(json_reply(completion(message, finish)))
    model = OpenAIChatModel(MODEL, client=server.client())
    with pytest.raises(ModelRefusalError) as caught:
        await model.complete(ModelRequest(None, (), (), ()))
    assert caught.value.code == "E_MODEL_REFUSAL"


def chunk(
    delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None
) -> dict[str, Any]:
    """A chat.completion.chunk as the API streams it."""
    choices = (
        []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-BNs0Yk3bcL8aRY4q5Oszl9JxeU3Lm",
        "object": "chat.completion.chunk",
        "created": 1744917292,
        "model": "gpt-4o-mini-2024-07-18",
        "service_tier": "default",
        "system_fingerprint": "fp_0392822090",
        "choices": choices,
        "usage": usage,
    }


STREAM_USAGE = completion({"content": ""})["usage"]


async def test_streaming_emits_text_deltas_and_ends_with_the_same_response(serve: Serve) -> None:
    """With a ModelTextDelta listener the answer is streamed: the listener gets each piece,
    the request asks for usage in the stream, and the ModelResponse equals the non-streamed
    one (the raw payload is the assembled completion)."""
    stream = sse_reply(
        [
            chunk({"role": "assistant", "content": "", "refusal": None}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo "}),
            chunk({"content": "Ann."}),
            chunk({}, "stop"),
            chunk(None, usage=STREAM_USAGE),
        ]
    )
    server = serve(stream, answer("Hello Ann."))
    runner = TurnRunner(model=OpenAIChatModel(MODEL, client=server.client()))
    deltas: list[ModelTextDelta] = []
    runner.on(ModelTextDelta, deltas.append)
    result = await runner.run("hi")
    assert result.output == "Hello Ann."
    assert [d.text for d in deltas] == ["Hel", "lo ", "Ann."]
    assert {(d.turn_id, d.iteration) for d in deltas} == {(result.turn_id, 0)}
    body = server.bodies[0]
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})

    streamed_server = serve(stream_copy(stream), answer("Hello Ann."))
    model = OpenAIChatModel(MODEL, client=streamed_server.client())
    request = ModelRequest(None, (), (), ())
    streamed = await model.complete(dataclasses.replace(request, on_text_delta=lambda _: None))
    plain = await model.complete(request)
    assert dataclasses.replace(streamed, raw=None) == dataclasses.replace(plain, raw=None)
    assert streamed.usage == Usage(20, 5, 0, 0)
    assert streamed.finish_reason == "stop"
    raw_message = streamed.raw["choices"][0]["message"]
    assert raw_message["content"] == "Hello Ann."
    assert streamed.raw["usage"] == plain.raw["usage"]


def stream_copy(response: httpx2.Response) -> httpx2.Response:
    return httpx2.Response(200, content=response.content, headers=response.headers)


async def test_streamed_tool_calls_are_assembled_by_index(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """Two calls streamed in fragments are assembled by index and run."""
    stream = sse_reply(
        [
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_S1",
                            "type": "function",
                            "function": {"name": "add", "arguments": ""},
                        }
                    ],
                }
            ),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '1,"b":2}'}}]}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_S2",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a":5,'},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"b":5}'}}]}),
            chunk({}, "tool_calls"),
            chunk(None, usage=STREAM_USAGE),
        ]
    )
    server = serve(stream, sse_reply([chunk({"content": "3 and 10"}, "stop")]))
    runner = runner_for(server, [add_tool])
    runner.on(ModelTextDelta, lambda _: None)
    result = await runner.run("What is 1+2?")
    assert result.output == "3 and 10"
    assert [(c.id, dict(c.args), text_of(c)) for c in result.tool_calls] == [
        ("call_S1", {"a": 1, "b": 2}, "3"),
        ("call_S2", {"a": 5, "b": 5}, "10"),
    ]


async def test_a_compatible_server_without_ids_and_with_object_arguments(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """A server that sends no call id and the arguments as an object: an id is minted, the
    arguments re-encoded, and the next request uses the minted id in both places."""
    lenient = json_reply(
        {
            "id": "chatcmpl-42",
            "object": "chat.completion",
            "created": 1744917292,
            "model": "qwen2.5:7b",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
        }
    )
    server = serve(lenient, answer("3"))
    client = server.client(base_url="http://localhost:11434/v1")
    model = OpenAIChatModel("qwen2.5:7b", client=client)
    assert model.provider == "openai-compatible"
    result = await TurnRunner(model=model, tools=[add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.usage == Usage(50, 5 + 9, 0, 0)
    (call,) = result.tool_calls
    assert re.fullmatch(r"call_[0-9a-f]{32}", call.id)
    assert text_of(call) == "3"
    messages = server.bodies[1]["messages"]
    assert messages[1:] == [
        assistant_calls((call.id, "add", '{"a":1,"b":2}')),
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": envelope("add", {"a": 1, "b": 2}, "3"),
        },
    ]
    assert server.requests[0].url == "http://localhost:11434/v1/chat/completions"


async def test_an_announced_call_without_a_record_still_gets_a_tool_message() -> None:
    """An assistant message whose call was never recorded (an aborted turn) is answered with
    an error tool message, or the provider would refuse the conversation."""
    from pipeline.models import Message

    server = Server([answer("ok")])
    model = OpenAIChatModel(MODEL, client=server.client())
    messages = (
        Message(role="user", content="go"),
        Message(role="assistant", content="", tool_call_ids=("call_lost",)),
        Message(role="user", content="again"),
    )
    await model.complete(ModelRequest(None, messages, (), ()))
    assert server.bodies[0]["messages"] == [
        {"role": "user", "content": "go"},
        assistant_calls(("call_lost", "unknown_tool", "{}")),
        {
            "role": "tool",
            "tool_call_id": "call_lost",
            "content": "Error: no result was recorded for this call.",
        },
        {"role": "user", "content": "again"},
    ]


async def test_an_aborted_turn_cancels_the_in_flight_http_request(serve: Serve) -> None:
    """Aborting a turn while the model call is in flight cancels the HTTP request itself."""
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang(request: httpx2.Request) -> httpx2.Response:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("not cancelled")  # pragma: no cover

    server = serve(hang)
    handle = TurnRunner(model=OpenAIChatModel(MODEL, client=server.client())).start("hi")
    await asyncio.wait_for(started.wait(), 5)
    handle.abort("user left")
    result = await asyncio.wait_for(handle, 5)
    assert result.status == "aborted"
    assert cancelled.is_set()


def test_settings_the_model_sets_itself_are_refused() -> None:
    """``messages``, ``tools``, ``stream``... are the model's own; a client excludes base_url."""
    client = Server([]).client()
    with pytest.raises(TypeError, match="stream"):
        OpenAIChatModel(MODEL, client=client, stream=True)
    with pytest.raises(TypeError, match="client"):
        OpenAIChatModel(MODEL, client=client, base_url="http://localhost:8000/v1")
    with pytest.raises(ValueError, match="model"):
        OpenAIChatModel("", client=client)
    assert OpenAIChatModel(MODEL, client=client, max_retries=7).client.max_retries == 7


def test_a_client_is_built_from_the_arguments_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a client: OpenAI needs a key (E_MODEL_AUTHENTICATION at construction without
    one); a compatible server gets a placeholder key; OPENAI_API_KEY is read."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelAuthenticationError):
        OpenAIChatModel(MODEL)
    local = OpenAIChatModel("llama3", base_url="http://localhost:8080/v1")
    assert (local.client.api_key, local.provider) == ("EMPTY", "openai-compatible")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    hosted = OpenAIChatModel(MODEL, timeout=12.5)
    assert (hosted.client.api_key, hosted.provider) == ("sk-env", "openai")
    assert "gpt-4o-mini" in repr(hosted)


def test_importing_pipeline_does_not_import_the_provider_sdks() -> None:
    """``import pipeline`` (and pipeline.models) loads no provider SDK: they load when used."""
    code = (
        "import json, sys, pipeline, pipeline.models\n"
        "sdks = ('openai', 'anthropic', 'httpx2')\n"
        "print(json.dumps([m for m in sdks if m in sys.modules]))\n"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert json.loads(out.stdout) == []


async def test_a_stream_cut_short_is_unavailable(serve: Serve) -> None:
    """A stream that ends without a finish reason is E_MODEL_UNAVAILABLE, never a partial
    answer taken for a whole one."""
    server = serve(sse_reply([chunk({"role": "assistant", "content": "Hel"})], done=False))
    runner = TurnRunner(model=OpenAIChatModel(MODEL, client=server.client()))
    runner.on(ModelTextDelta, lambda _: None)
    result = await runner.run("hi")
    assert [e.code for e in result.errors] == ["E_MODEL_UNAVAILABLE"]


async def test_made_up_tool_names_are_sent_back_in_the_names_pattern(serve: Serve) -> None:
    """A call to a tool name the API would refuse in the conversation (``math.add``, no name
    at all) is sent back with the name made to fit ``[A-Za-z0-9_-]{1,64}``."""
    server = serve(
        calls(("call_dot", "math.add", "{}"), ("call_none", "", "{}")),
        answer("sorry"),
    )
    assert (await runner_for(server, []).run("What is 1+2?")).ok
    sent = server.bodies[1]["messages"][2]["tool_calls"]
    assert [c["function"]["name"] for c in sent] == ["math_add", "_unnamed_"]
