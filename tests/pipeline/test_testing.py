"""The test doubles in `pipeline.testing`: ScriptedModel, make_dispatch_context."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from pipeline import DispatchContext, Stash, Tool, ToolRegistry
from pipeline.calls import ToolCall
from pipeline.events import Event, ToolCallStored
from pipeline.models import Message, ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel, make_dispatch_context


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(
        system_prompt=None,
        messages=(Message(role="user", content=text),),
        tool_calls=(),
        tools=(),
    )


async def test_scripted_model_answers_step_k_on_call_k_then_done() -> None:
    """Step k answers the k-th complete() call; past the end it answers text "done"."""
    first = ModelResponse(tool_calls=[ProposedToolCall(id="a", name="t", arguments="{}")])
    second = ModelResponse(text="second")
    model = ScriptedModel([first, second])
    assert await model.complete(request("1")) is first
    assert await model.complete(request("2")) is second
    assert await model.complete(request("3")) == ModelResponse(text="done")
    assert await model.complete(request("4")) == ModelResponse(text="done")
    assert [r.messages[0].content for r in model.requests] == ["1", "2", "3", "4"]
    assert "answered=4" in repr(model)


async def test_scripted_model_can_cycle_reset_and_skip_recording() -> None:
    """cycle=True restarts the script, record=False keeps no requests, reset() rewinds."""
    a, b = ModelResponse(text="a"), ModelResponse(text="b")
    model = ScriptedModel([a, b], cycle=True, record=False)
    answers = [(await model.complete(request())).text for _ in range(5)]
    assert answers == ["a", "b", "a", "b", "a"]
    assert model.requests == []
    recorded = ScriptedModel([a, b])
    await recorded.complete(request())
    recorded.reset()
    assert recorded.requests == []
    assert (await recorded.complete(request())).text == "a"


def test_scripted_model_rejects_bad_scripts() -> None:
    """Non-ModelResponse steps are a TypeError; an empty cycling script is a ValueError."""
    with pytest.raises(TypeError, match="ModelResponse"):
        ScriptedModel(["text"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one step"):
        ScriptedModel([], cycle=True)


def test_make_dispatch_context_defaults() -> None:
    """With no arguments: empty tools, empty stash, iteration 0, no calls, no messages."""
    ctx = make_dispatch_context()
    assert isinstance(ctx, DispatchContext)
    assert len(ctx.tools) == 0
    assert ctx.stash.all() == {}
    assert ctx.iteration == 0
    assert ctx.turn_tool_calls == ()
    assert ctx.new_tool_calls == ()
    assert ctx.messages == ()
    assert not ctx.is_signalled
    assert not ctx.aborted
    assert ctx.turn.turn_id == ctx.turn_id


def test_make_dispatch_context_overrides(echo_tool: Tool[BaseModel]) -> None:
    """tools, stash, tool_calls, iteration and messages overrides all land in the context."""
    call = ToolCall.completed(id="c1", tool="echo", args={"text": "x"}, results="x")
    message = Message(role="user", content="question")
    ctx = make_dispatch_context(
        tools=[echo_tool],
        stash={"user": {"id": 7}},
        tool_calls=[call],
        iteration=4,
        messages=[message],
    )
    assert [t.name for t in ctx.tools.all()] == ["echo"]
    assert ctx.stash.get("user.id") == 7
    assert ctx.turn_tool_calls == (call,)
    assert ctx.new_tool_calls == (call,)
    assert ctx.get_tool_call("c1") is call
    assert ctx.tool_call_count(call.checksum) == 1
    assert ctx.iteration == 4
    assert ctx.messages == (message,)


def test_make_dispatch_context_copies_a_registry_but_uses_a_given_stash(
    echo_tool: Tool[BaseModel],
) -> None:
    """A ToolRegistry is copied (the original is untouched); a Stash is used as is."""
    registry = ToolRegistry([echo_tool])
    stash = Stash({"a": 1})
    ctx = make_dispatch_context(tools=registry, stash=stash)
    ctx.tools.unregister("echo")
    assert "echo" in registry
    assert ctx.stash is stash


def test_make_dispatch_context_separates_new_calls_and_history() -> None:
    """new_tool_calls can differ from tool_calls; history calls count but are not this turn's."""
    old = ToolCall.completed(id="old", tool="echo", args={"text": "x"}, results="x")
    now = ToolCall.completed(id="now", tool="echo", args={"text": "x"}, results="x")
    ctx = make_dispatch_context(tool_calls=[now], new_tool_calls=[], history_tool_calls=[old])
    assert ctx.new_tool_calls == ()
    assert ctx.turn_tool_calls == (now,)
    assert ctx.tool_call_count(now.checksum) == 2
    assert ctx.turn.history_tool_calls == (old,)


async def test_make_dispatch_context_captures_events_and_uses_the_store() -> None:
    """events= receives what the context emits; store= receives what it persists."""
    events: list[Event] = []
    store = MemoryStore()
    ctx = make_dispatch_context(events=events, store=store)
    call = ToolCall.completed(id="c1", tool="echo", args={}, results="x")
    await ctx.store_tool_call(call)
    assert [type(e) for e in events] == [ToolCallStored]
    assert repr(store) == "MemoryStore(turns=0, tool_calls=0)"  # no conversation: not retained


async def test_a_middleware_can_be_unit_tested_with_make_dispatch_context() -> None:
    """A dispatch middleware runs against a made context and a stub call_next, no runner."""

    async def count_calls(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            ctx.stash.update(f"counts.{call.tool}", lambda n: n + 1, default=0)
        await call_next()

    reached: list[bool] = []

    async def call_next() -> None:
        reached.append(True)

    calls = [
        ToolCall.completed(id=f"c{i}", tool=name, args={"i": i}, results="x")
        for i, name in enumerate(["search", "fetch", "search"])
    ]
    ctx = make_dispatch_context(tool_calls=calls)
    await count_calls(ctx, call_next)
    assert ctx.stash.get("counts") == {"search": 2, "fetch": 1}
    assert reached == [True]
