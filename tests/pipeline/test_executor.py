"""`ToolLoopExecutor` with `ScriptedModel`: error calls, ordering, ids, requests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import Middleware
from pipeline import DispatchContext, Tool, ToolLoopExecutor, TurnResult, TurnRunner, tool
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.errors import TurnAbortedError
from pipeline.events import ToolExecutionEnd
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel


def proposal(name: str, arguments: str | dict[str, Any], call_id: str = "c1") -> ProposedToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ProposedToolCall(id=call_id, name=name, arguments=text)


def one_call(name: str, arguments: str | dict[str, Any], call_id: str = "c1") -> ModelResponse:
    return ModelResponse(tool_calls=[proposal(name, arguments, call_id)])


def text_of(call: ToolCall) -> str:
    """The text a call shows the model (error text, or an inline artifact's body)."""
    results = call.results
    if isinstance(results, str):
        return results
    assert isinstance(results, SpooledArtifact)
    return results.as_string()


async def run_one(
    response: ModelResponse, tools: list[Tool[Any]]
) -> tuple[TurnResult, ScriptedModel]:
    model = ScriptedModel([response, ModelResponse(text="recovered")])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=tools)
    return await runner.run("go"), model


BAD_CALLS = {
    "malformed-json": (one_call("add", '{"a": 1,'), "not valid JSON"),
    "json-array": (one_call("add", "[1, 2]"), "must be a JSON object, got an array"),
    "json-string": (one_call("add", '"hello"'), "must be a JSON object, got a string"),
    "unknown-tool": (one_call("subtract", {"a": 1}), "available tools: add, echo, boom"),
    "invalid-args": (one_call("add", {"a": "5", "b": 2}), "E_INVALID_TOOL_ARGS"),
    "unknown-arg": (one_call("add", {"a": 1, "b": 2, "c": 3}), "E_INVALID_TOOL_ARGS"),
    "raising-handler": (one_call("boom", {}), "kaboom"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS), ids=list(BAD_CALLS))
async def test_bad_calls_become_error_calls_the_model_sees_next_iteration(
    case: str,
    add_tool: Tool[BaseModel],
    echo_tool: Tool[BaseModel],
    boom_tool: Tool[BaseModel],
) -> None:
    """Each bad call is stored as an error ToolCall, shown to the model, and the turn completes."""
    response, expected = BAD_CALLS[case]
    result, model = await run_one(response, [add_tool, echo_tool, boom_tool])
    assert result.status == "completed"
    assert result.output == "recovered"
    assert result.errors == ()
    (call,) = result.tool_calls
    assert call.is_error
    assert call.is_complete
    assert call.id == "c1"
    assert expected in text_of(call)
    assert len(model.requests) == 2
    assert model.requests[0].tool_calls == ()
    assert model.requests[1].tool_calls == (call,)


async def test_unparseable_arguments_are_stored_with_empty_args(add_tool: Tool[BaseModel]) -> None:
    """Invalid JSON and non-object arguments give an error call whose args are {}."""
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    proposal("add", "{oops", "c1"),
                    proposal("add", "[1]", "c2"),
                    proposal("add", "42", "c3"),
                ]
            )
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[add_tool])
    result = await runner.run("go")
    assert [dict(c.args) for c in result.tool_calls] == [{}, {}, {}]
    assert all(c.is_error for c in result.tool_calls)
    assert "got a number" in text_of(result.tool_calls[2])


async def test_unknown_tool_text_lists_only_visible_tools(
    add_tool: Tool[BaseModel], echo_tool: Tool[BaseModel]
) -> None:
    """The unknown-tool message names the tools the model can see, not hidden ones."""

    async def hide_echo(ctx: DispatchContext, call_next: CallNext) -> None:
        ctx.tools.hide("echo")
        await call_next()

    model = ScriptedModel([one_call("nope", {})])
    plain = Middleware("plain")
    plain.dispatch_input(hide_echo)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[add_tool, echo_tool], middleware=[plain]
    )
    result = await runner.run("go")
    message = text_of(result.tool_calls[0])
    assert "E_TOOL_NOT_FOUND" in message
    assert "'nope'" in message
    assert "available tools: add" in message
    assert "echo" not in message.split("available tools:")[1]
    assert [d["name"] for d in model.requests[0].tools] == ["add"]


async def test_empty_argument_text_means_no_arguments() -> None:
    """An empty arguments string is treated as an empty object."""

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    result, _ = await run_one(one_call("ping", ""), [ping])
    (call,) = result.tool_calls
    assert not call.is_error
    assert text_of(call) == "pong"


async def test_a_handler_returning_a_non_output_is_an_error_call() -> None:
    """A handler returning something that is not a tool output becomes an error call."""

    def handler(args: BaseModel, ctx: DispatchContext, meta: Any) -> Any:
        return {42}  # a set: not JSON data

    class NoArgs(BaseModel):
        pass

    weird = Tool(name="weird", description="Returns a set.", input_schema=NoArgs, handler=handler)
    result, _ = await run_one(one_call("weird", {}), [weird])
    (call,) = result.tool_calls
    assert call.is_error
    assert "returned set" in text_of(call)
    assert result.status == "completed"


def sleeper(name: str, seconds: float) -> Tool[BaseModel]:
    @tool(name=name)
    async def sleepy() -> str:
        """Sleep, then answer with the tool name."""
        await asyncio.sleep(seconds)
        return name

    return sleepy


async def test_parallel_calls_run_concurrently_but_are_stored_in_proposal_order() -> None:
    """With parallel_tool_calls, slower-first calls finish out of order yet store in order."""
    tools = [sleeper("slow", 0.06), sleeper("medium", 0.03), sleeper("fast", 0.0)]
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[proposal(t.name, {}, f"id_{t.name}") for t in tools],
            )
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model, parallel_tool_calls=True), tools=tools)
    finished: list[str] = []
    runner.on(ToolExecutionEnd, lambda e: finished.append(e.tool_name))
    result = await runner.run("go")
    assert finished == ["fast", "medium", "slow"]
    assert [c.tool for c in result.tool_calls] == ["slow", "medium", "fast"]
    assert [c.id for c in result.tool_calls] == ["id_slow", "id_medium", "id_fast"]
    assert result.messages[1].tool_call_ids == ("id_slow", "id_medium", "id_fast")


async def test_sequential_calls_run_one_after_another_in_proposal_order() -> None:
    """Without parallel_tool_calls, calls run and are stored strictly in proposal order."""
    tools = [sleeper("slow", 0.02), sleeper("fast", 0.0)]
    model = ScriptedModel([ModelResponse(tool_calls=[proposal(t.name, {}, t.name) for t in tools])])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=tools)
    finished: list[str] = []
    runner.on(ToolExecutionEnd, lambda e: finished.append(e.tool_name))
    result = await runner.run("go")
    assert finished == ["slow", "fast"]
    assert [c.tool for c in result.tool_calls] == ["slow", "fast"]


async def test_duplicate_provider_ids_are_made_unique(echo_tool: Tool[BaseModel]) -> None:
    """Repeated or empty provider ids, in one response or across iterations, never collide."""
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    proposal("echo", {"text": "a"}, "dup"),
                    proposal("echo", {"text": "b"}, "dup"),
                    proposal("echo", {"text": "c"}, ""),
                ]
            ),
            one_call("echo", {"text": "d"}, "dup"),
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool])
    result = await runner.run("go")
    assert result.status == "completed"
    ids = [c.id for c in result.tool_calls]
    assert len(set(ids)) == 4
    assert ids[0] == "dup"
    assert ids[1].startswith("dup")
    assert ids[1] != "dup"
    assert ids[2]
    assert ids[3].startswith("dup")
    assert ids[3] not in ids[:3]
    assert [text_of(c) for c in result.tool_calls] == ["a", "b", "c", "d"]
    assert result.messages[1].tool_call_ids == tuple(ids[:3])


async def test_requests_carry_system_prompt_messages_calls_and_visible_tools(
    echo_tool: Tool[BaseModel], add_tool: Tool[BaseModel]
) -> None:
    """Each request has the system prompt, the conversation so far, prior calls and tools."""
    model = ScriptedModel([one_call("echo", {"text": "x"}), ModelResponse(text="bye")])
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[echo_tool, add_tool], system_prompt="Be brief."
    )
    result = await runner.run("hello")
    first, second = model.requests
    assert first.system_prompt == "Be brief."
    assert [(m.role, m.content) for m in first.messages] == [("user", "hello")]
    assert [d["name"] for d in first.tools] == ["echo", "add"]
    assert first.tools[0]["input_schema"]["type"] == "object"
    assert [m.role for m in second.messages] == ["user", "assistant"]
    assert second.messages[1].tool_call_ids == ("c1",)
    assert second.tool_calls == result.tool_calls
    assert result.messages[-1].content == "bye"
    assert result.messages[-1].tool_call_ids == ()


async def test_short_text_results_are_inline_and_long_ones_are_artifacts(
    echo_tool: Tool[BaseModel],
) -> None:
    """Text up to inline_limit bytes is shown whole; longer text becomes a queryable artifact."""
    long_text = "line\n" * 20
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    proposal("echo", {"text": "short"}, "s"),
                    proposal("echo", {"text": long_text}, "l"),
                ]
            )
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model, inline_limit=32), tools=[echo_tool])
    result = await runner.run("go")
    short, long = result.tool_calls
    assert short.inline
    assert not long.inline
    assert isinstance(long.results, SpooledArtifact)
    assert long.results.as_string() == long_text
    assert len(model.requests[1].tools) > len(model.requests[0].tools)


async def test_a_tool_sees_the_dispatch_context() -> None:
    """A @tool parameter annotated DispatchContext receives the live dispatch context."""
    seen: list[tuple[str, int]] = []

    @tool
    def whoami(ctx: DispatchContext) -> str:
        """Report the turn and iteration."""
        seen.append((ctx.turn_id, ctx.iteration))
        ctx.stash.set("whoami.called", True)
        return "me"

    result, _ = await run_one(one_call("whoami", {}), [whoami])
    assert seen == [(result.turn_id, 0)]
    assert result.stash["whoami"] == {"called": True}


def test_executor_rejects_bad_configuration() -> None:
    """A model without complete() is a TypeError; a bad inline_limit is a ValueError."""
    with pytest.raises(TypeError):
        ToolLoopExecutor(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inline_limit"):
        ToolLoopExecutor(ScriptedModel([]), inline_limit=-1)
    assert "parallel_tool_calls=True" in repr(
        ToolLoopExecutor(ScriptedModel([]), parallel_tool_calls=True)
    )


async def test_no_proposed_calls_stores_the_answer_and_acks() -> None:
    """A text-only response is stored as the assistant message and acks on iteration 0."""
    acked: list[bool] = []

    async def check(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()
        acked.append(ctx.is_acked)

    model = ScriptedModel([ModelResponse(text="hi!")])
    plain = Middleware("plain")
    plain.dispatch_input(check)
    runner = TurnRunner(executor=ToolLoopExecutor(model), middleware=[plain])
    result = await runner.run("go")
    assert (result.status, result.output, result.iterations) == ("completed", "hi!", 1)
    assert result.tool_calls == ()
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert acked == [False]


async def test_deep_arguments_to_an_unknown_tool_become_an_error_call() -> None:
    """Arguments too deep to checksum, sent to an unknown tool, are an error call, not a crash."""
    deep = '{"a": ' + "[" * 700 + "]" * 700 + "}"
    result, _ = await run_one(one_call("missing", deep), [])
    assert result.status == "completed"
    (call,) = result.tool_calls
    assert call.is_error
    assert "nested too deeply" in text_of(call)


async def test_a_parallel_call_aborting_cancels_its_siblings_and_keeps_finished_ones() -> None:
    """A parallel call raising TurnAbortedError cancels running siblings and keeps finished ones."""
    fast_done = asyncio.Event()
    cancelled: list[str] = []

    @tool
    def fast() -> str:
        """Finish at once."""
        fast_done.set()
        return "fast"

    @tool
    async def slow() -> str:
        """Sleep for a long time."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return "slow"

    @tool
    async def stop() -> str:
        """Abort the turn once the fast call finished."""
        await fast_done.wait()
        raise TurnAbortedError("enough")

    response = ModelResponse(
        tool_calls=[proposal("fast", {}, "f"), proposal("slow", {}, "s"), proposal("stop", {}, "x")]
    )
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([response]), parallel_tool_calls=True),
        tools=[fast, slow, stop],
    )
    result = await asyncio.wait_for(runner.run("go"), 1.0)
    assert result.status == "aborted"
    assert cancelled == ["slow"]
    # the cancelled and the aborting calls are answered with errors
    answered = [(c.id, c.is_error) for c in result.tool_calls]
    assert answered == [("f", False), ("s", True), ("x", True)]
