"""`OpenAIResponsesModel` through the real `openai` SDK over a MockTransport: the exact request
bodies (instructions, input items, function tools, ``store: false``), the responses it reads
(recorded in the Responses wire format), the event stream, and failures."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

from pipeline import Tool, TurnRunner, tool, tool_call_checksum
from pipeline.artifacts import Media, SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.errors import ModelAuthenticationError, ModelContextLengthError, ModelRefusalError
from pipeline.events import ModelTextDelta
from pipeline.models import ModelRequest, OpenAIResponsesModel, Usage
from pipeline.stores import MemoryStore

from .conftest import Server, error_body, json_reply, sse_reply

Serve = Callable[..., Server]
MODEL = "gpt-4.1-mini"
ADD_TOOL = {
    "type": "function",
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
    "strict": False,
}
USER = {"role": "user", "content": "What is 1+2?"}


def response(
    output: list[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete: str | None = None,
    inp: int = 20,
    out: int = 5,
    cached: int = 0,
    reasoning: int = 0,
) -> dict[str, Any]:
    """A response object as the API returns it."""
    return {
        "id": "resp_68af3e1c2b7c8190a1f4f2a5d3c0b6e1",
        "object": "response",
        "created_at": 1756311068,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": "Be brief.",
        "max_output_tokens": None,
        "model": "gpt-4.1-mini-2025-04-14",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": inp + out,
        },
        "user": None,
        "metadata": {},
    }


def message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_68af3e1d5e048190b1c7a2f1e3d4c5b6",
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}],
        "role": "assistant",
    }


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def answer(
    text: str, *, inp: int = 20, out: int = 5, cached: int = 0, reasoning: int = 0
) -> httpx2.Response:
    body = response([message(text)], inp=inp, out=out, cached=cached, reasoning=reasoning)
    return json_reply(body)


def envelope(tool_name: str, args: dict[str, Any], body: str) -> str:
    nonce = tool_call_checksum(tool_name, args)
    tag = f"untrusted_content_{nonce}"
    return f'<{tag} nonce="{nonce}" kind="tool-result" tool="{tool_name}">\n{body}\n</{tag}>'


def call_item(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output_item(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def runner_for(server: Server, tools: list[Tool[BaseModel]], **settings: Any) -> TurnRunner:
    model = OpenAIResponsesModel(MODEL, client=server.client(), **settings)
    return TurnRunner(model=model, tools=tools, system_prompt="Be brief.")


def text_of(call: ToolCall) -> str:
    """A small result is kept inline as the plain string; a large one is an artifact."""
    results = call.results
    if isinstance(results, SpooledArtifact):
        return results.as_string()
    assert isinstance(results, str)
    return results


async def test_plain_text_sends_instructions_input_and_store_false(serve: Serve) -> None:
    """A plain answer: instructions, one user input item, ``store: false``; text and usage
    (cached and reasoning tokens included) are read from the response."""
    server = serve(answer("Hello!", inp=30, out=8, cached=12, reasoning=3))
    result = await runner_for(server, []).run("What is 1+2?")
    assert result.output == "Hello!"
    assert server.bodies == [
        {
            "model": MODEL,
            "input": [USER],
            "instructions": "Be brief.",
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
    ]
    assert server.requests[0].url == "https://api.openai.com/v1/responses"
    assert result.usage == Usage(30, 8, 12, 3)


async def test_one_tool_call_sends_function_call_and_output_items(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """The second request carries the function_call (exact call_id, compact arguments) and
    its function_call_output with the enveloped result; tools are Responses function tools."""
    server = serve(
        json_reply(response([function_call("call_R1", "add", '{"a": 1, "b": 2}')], inp=40)),
        answer("3", inp=60, cached=32),
    )
    result = await runner_for(server, [add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.output == "3"
    first, second = server.bodies
    assert first == {
        "model": MODEL,
        "input": [USER],
        "instructions": "Be brief.",
        "tools": [ADD_TOOL],
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    assert second["input"] == [
        USER,
        call_item("call_R1", "add", '{"a":1,"b":2}'),
        output_item("call_R1", envelope("add", {"a": 1, "b": 2}, "3")),
    ]
    assert result.usage == Usage(100, 10, 32, 0)


async def test_parallel_calls_after_text_keep_their_order(
    serve: Serve, add_tool: Tool[BaseModel], echo_tool: Tool[BaseModel]
) -> None:
    """Text and two calls in one response: the assistant text, both calls, both outputs."""
    server = serve(
        json_reply(
            response(
                [
                    message("Working on it."),
                    function_call("call_A", "add", '{"a":2,"b":3}'),
                    function_call("call_B", "echo", '{"text":"hi"}'),
                ]
            )
        ),
        answer("5 and hi"),
    )
    runner = runner_for(server, [add_tool, echo_tool], parallel_tool_calls=True)
    assert (await runner.run("What is 1+2?")).ok
    first, second = server.bodies
    assert first["parallel_tool_calls"] is True
    assert second["input"][1:] == [
        {"role": "assistant", "content": "Working on it."},
        call_item("call_A", "add", '{"a":2,"b":3}'),
        call_item("call_B", "echo", '{"text":"hi"}'),
        output_item("call_A", envelope("add", {"a": 2, "b": 3}, "5")),
        output_item("call_B", envelope("echo", {"text": "hi"}, "hi")),
    ]


async def test_invalid_json_arguments_become_an_error_the_model_reads(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """Arguments that are not JSON become an error output the model reads next request; its
    call is shown with the text it sent."""
    server = serve(
        json_reply(response([function_call("call_bad", "add", "{'a': 1}")])), answer("ok")
    )
    result = await runner_for(server, [add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.tool_calls[0].is_error
    error = (
        "Error: E_INVALID_TOOL_ARGS: the arguments for 'add' are not valid JSON "
        "(Expecting property name enclosed "
        "in double quotes at line 1 column 2); send a JSON object."
    )
    assert server.bodies[1]["input"][1:] == [
        call_item("call_bad", "add", "{'a': 1}"),
        output_item("call_bad", envelope("add", {}, error)),
    ]


async def test_a_multi_iteration_turn_extends_the_previous_input(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """Each request's input is the previous one plus the new step."""
    server = serve(
        json_reply(response([function_call("call_1", "add", '{"a":1,"b":2}')])),
        json_reply(response([function_call("call_2", "add", '{"a":3,"b":4}')])),
        answer("3 then 7"),
    )
    result = await runner_for(server, [add_tool]).run("What is 1+2?")
    assert result.ok
    assert result.iterations == 3
    second, third = server.bodies[1]["input"], server.bodies[2]["input"]
    assert third[: len(second)] == second
    assert third[1:] == [
        call_item("call_1", "add", '{"a":1,"b":2}'),
        output_item("call_1", envelope("add", {"a": 1, "b": 2}, "3")),
        call_item("call_2", "add", '{"a":3,"b":4}'),
        output_item("call_2", envelope("add", {"a": 3, "b": 4}, "7")),
    ]


PNG = b"\x89PNG\r\n\x1a\n fake image bytes"


async def test_media_ride_in_the_function_call_output(serve: Serve) -> None:
    """An image and a document: the output is a list of the envelope text, then a label and
    an input_image / input_file item (data URLs) per media item."""

    @tool
    def fetch() -> list[Media]:
        """Fetch a picture and a paper."""
        return [
            Media.retrieved_public("image", "image/png", "p.png", PNG),
            Media.retrieved_public("document", "application/pdf", "a.pdf", b"%PDF-1.7"),
        ]

    server = serve(json_reply(response([function_call("call_m", "fetch", "{}")])), answer("ok"))
    result = await runner_for(server, [fetch]).run("go")
    assert result.ok
    (out,) = [i for i in server.bodies[1]["input"] if i.get("type") == "function_call_output"]
    results = result.tool_calls[0].results
    assert isinstance(results, tuple)
    image, doc = results
    assert isinstance(image, Media)
    assert isinstance(doc, Media)
    items = out["output"]
    assert items[0]["type"] == "input_text"
    assert 'kind="media"' in items[0]["text"]
    assert items[1:] == [
        {
            "type": "input_text",
            "text": f'[attachment: media id {image.id} (image, "p.png") from tool call call_m; '
            "its trust tier is given in that call's result]",
        },
        {
            "type": "input_image",
            "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
        },
        {
            "type": "input_text",
            "text": f'[attachment: media id {doc.id} (document, "a.pdf") from tool call call_m; '
            "its trust tier is given in that call's result]",
        },
        {
            "type": "input_file",
            "filename": "a.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7").decode(),
        },
    ]


async def test_429_then_success_is_retried_by_the_sdk(serve: Serve) -> None:
    """The SDK's own retry gets past a rate limit."""
    limited = json_reply(
        error_body("Rate limit reached.", "requests", "rate_limit_exceeded"),
        429,
        retry_after_ms="1",
    )
    server = serve(limited, answer("ok"))
    model = OpenAIResponsesModel(MODEL, client=server.client(max_retries=1))
    assert (await TurnRunner(model=model).run("hi")).output == "ok"
    assert len(server.requests) == 2


async def test_401_fails_the_turn_and_keeps_stored_calls(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """A refused key mid-turn ends the turn failed with E_MODEL_AUTHENTICATION; the call
    stored before stays stored."""
    refused = json_reply(
        error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"), 401
    )
    server = serve(json_reply(response([function_call("call_1", "add", '{"a":1,"b":2}')])), refused)
    store = MemoryStore()
    runner = TurnRunner(
        model=OpenAIResponsesModel(MODEL, client=server.client()), tools=[add_tool], store=store
    )
    result = await runner.run("What is 1+2?", conversation_id="conv")
    assert result.status == "failed"
    (error,) = result.errors
    assert isinstance(error, ModelAuthenticationError)
    assert error.code == "E_MODEL_AUTHENTICATION"
    assert (error.status_code, error.request_id) == (401, "req_test123")
    _, stored = await store.load_conversation("conv")
    assert [c.id for c in stored] == ["call_1"]


async def test_400_context_length_maps_to_its_own_code(serve: Serve) -> None:
    """``context_length_exceeded`` is E_MODEL_CONTEXT_LENGTH."""
    too_long = json_reply(
        error_body(
            "Your input exceeds the context window of this model.",
            "invalid_request_error",
            "context_length_exceeded",
            "input",
        ),
        400,
    )
    server = serve(too_long)
    result = await TurnRunner(model=OpenAIResponsesModel(MODEL, client=server.client())).run("hi")
    (error,) = result.errors
    assert isinstance(error, ModelContextLengthError)
    assert error.code == "E_MODEL_CONTEXT_LENGTH"


def text_events(parts: list[str], final: dict[str, Any]) -> list[dict[str, Any]]:
    """The event stream of a text answer, as the API sends it."""
    pending = {**final, "status": "in_progress", "output": [], "usage": None}
    item = {**message(""), "status": "in_progress", "content": []}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.content_part.added",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
    ]
    for piece in parts:
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        )
    text = "".join(parts)
    events += [
        {
            "type": "response.output_text.done",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "part": {**part, "text": text},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": message(text)},
        {"type": "response.completed", "response": final},
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


async def test_streaming_emits_text_deltas_and_ends_with_the_same_response(serve: Serve) -> None:
    """With a ModelTextDelta listener the response is streamed: each output_text delta
    reaches the listener, and the ModelResponse (raw included) equals the non-streamed one."""
    final = response([message("Hello Ann.")])
    events = text_events(["Hel", "lo ", "Ann."], final)
    server = serve(sse_reply(events, named=True, done=False))
    runner = TurnRunner(model=OpenAIResponsesModel(MODEL, client=server.client()))
    deltas: list[str] = []
    runner.on(ModelTextDelta, lambda e: deltas.append(e.text))
    result = await runner.run("hi")
    assert (result.output, deltas) == ("Hello Ann.", ["Hel", "lo ", "Ann."])
    assert server.bodies[0]["stream"] is True

    other = serve(sse_reply(events, named=True, done=False), json_reply(final))
    model = OpenAIResponsesModel(MODEL, client=other.client())
    request = ModelRequest(None, (), (), ())
    streamed = await model.complete(dataclasses.replace(request, on_text_delta=lambda _: None))
    assert streamed == await model.complete(request)
    assert streamed.finish_reason == "stop"
    assert streamed.usage == Usage(20, 5, 0, 0)


FAILURES = {
    "failed-event": (
        [
            {
                "type": "response.failed",
                "sequence_number": 1,
                "response": {
                    **response([], status="failed"),
                    "error": {"code": "server_error", "message": "The server had an error."},
                },
            }
        ],
        "E_MODEL_UNAVAILABLE",
    ),
    "error-event": (
        [
            {
                "type": "error",
                "sequence_number": 1,
                "code": "rate_limit_exceeded",
                "message": "Rate limit reached.",
                "param": None,
            }
        ],
        "E_MODEL_RATE_LIMITED",
    ),
    "cut-short": (
        [
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": response([], status="in_progress"),
            }
        ],
        "E_MODEL_UNAVAILABLE",
    ),
}


@pytest.mark.parametrize("case", list(FAILURES.values()), ids=list(FAILURES))
async def test_stream_failures_map_to_stable_codes(
    serve: Serve, case: tuple[list[dict[str, Any]], str]
) -> None:
    """A failed response, an error event or a stream cut short each have their code."""
    events, expected = case
    server = serve(sse_reply(events, named=True, done=False))
    runner = TurnRunner(model=OpenAIResponsesModel(MODEL, client=server.client()))
    runner.on(ModelTextDelta, lambda _: None)
    result = await runner.run("hi")
    assert [e.code for e in result.errors] == [expected]


async def test_incomplete_responses_report_why_and_filtered_ones_are_refusals(
    serve: Serve,
) -> None:
    """``incomplete`` for max_output_tokens is the finish reason; content_filter and a refusal
    part raise ModelRefusalError."""
    refusal = {**message(""), "content": [{"type": "refusal", "refusal": "I can't help."}]}
    server = serve(
        json_reply(
            response([message("Partial")], status="incomplete", incomplete="max_output_tokens")
        ),
        json_reply(response([message("x")], status="incomplete", incomplete="content_filter")),
        json_reply(response([refusal])),
    )
    model = OpenAIResponsesModel(MODEL, client=server.client(), max_output_tokens=16)
    request = ModelRequest(None, (), (), ())
    cut = await model.complete(request)
    assert (cut.text, cut.finish_reason) == ("Partial", "max_output_tokens")
    assert server.bodies[0]["max_output_tokens"] == 16
    for _ in range(2):
        with pytest.raises(ModelRefusalError):
            await model.complete(request)


async def test_store_can_be_turned_on(serve: Serve) -> None:
    """``store=True`` overrides the default."""
    server = serve(answer("ok"))
    model = OpenAIResponsesModel(MODEL, client=server.client(), store=True)
    await model.complete(ModelRequest(None, (), (), ()))
    assert server.bodies[0]["store"] is True


async def test_tool_results_read_back_through_the_runner(
    serve: Serve, add_tool: Tool[BaseModel]
) -> None:
    """The tool ran on the arguments the Responses API sent."""
    server = serve(
        json_reply(response([function_call("call_X", "add", '{"a":20,"b":22}')])), answer("42")
    )
    result = await runner_for(server, [add_tool]).run("What is 20+22?")
    assert [text_of(c) for c in result.tool_calls] == ["42"]
