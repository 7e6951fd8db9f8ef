"""`DispatchContext.model_request()` builds what the built-in executor sends, and the hot
path's message and record builders make exactly what the checked constructors make."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline._json import tool_call_checksum
from pipeline.calls import ToolCall
from pipeline.calls._toolcall import build_record
from pipeline.events import ModelTextDelta
from pipeline.models import Message, ModelRequest, ModelResponse, ProposedToolCall
from pipeline.models._message import new_message
from pipeline.testing import ScriptedModel, make_dispatch_context


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@tool
def hidden(text: str) -> str:
    """Never offered."""
    return text


async def test_the_request_carries_the_turn_as_the_context_shows_it() -> None:
    """Prompt, history, visible definitions, turn id and the tools match the context's reads."""
    first = ToolCall.completed(id="h1", tool="echo", args={"text": "a"}, results="a")
    ctx = make_dispatch_context(
        tools=[echo, hidden],
        system_prompt="be brief",
        messages=[Message(role="user", content="go")],
        history_tool_calls=[first],
    )
    ctx.tools.hide("hidden")
    await ctx.store_tool_call(
        ToolCall.completed(id="c1", tool="echo", args={"text": "b"}, results="b")
    )
    request = ctx.model_request()
    assert isinstance(request, ModelRequest)
    assert request.system_prompt == "be brief"
    assert request.messages == ctx.messages
    assert [c.id for c in request.tool_calls] == ["h1", "c1"]
    assert [d["name"] for d in request.tools] == ["echo"]  # the hidden tool is not offered
    assert request.turn_id == ctx.turn_id
    view = request.tool_view
    assert view is not None
    assert view is not ctx.tools  # a read-only view, not the registry
    assert view.get("hidden") is hidden
    assert view.get_visible("hidden") is None
    assert view.get_visible("echo") is echo
    ctx.tools.unhide("hidden")
    assert view.get_visible("hidden") is None  # what the request was made with, unchanged
    assert ctx.model_request().tool_view is not view  # a change makes a new view
    assert request.on_text_delta is None  # nobody listens for text deltas


async def test_a_request_keeps_showing_the_history_it_was_made_with() -> None:
    """Calls stored after the request was built do not appear in it (a view, not a copy)."""
    ctx = make_dispatch_context(tools=[echo], messages=[Message(role="user", content="go")])
    request = ctx.model_request()
    await ctx.store_message(Message(role="assistant", content="later"))
    await ctx.store_tool_call(
        ToolCall.completed(id="c1", tool="echo", args={"text": "b"}, results="b")
    )
    assert [m.content for m in request.messages] == ["go"]
    assert list(request.tool_calls) == []


class _StreamingModel:
    """Streams its answer through ``on_text_delta`` when the request carries one."""

    def __init__(self) -> None:
        self.saw_callback: list[bool] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.saw_callback.append(request.on_text_delta is not None)
        if request.on_text_delta is not None:
            for piece in ("Hel", "lo"):
                request.on_text_delta(piece)
        return ModelResponse(text="Hello")


async def test_a_listener_for_text_deltas_gets_a_streaming_callback() -> None:
    """With a `ModelTextDelta` listener the request streams; without one it carries none."""
    model = _StreamingModel()
    runner = TurnRunner(executor=ToolLoopExecutor(model))
    deltas: list[str] = []
    await runner.run("hi")
    runner.on(ModelTextDelta, lambda e: deltas.append(e.text))
    result = await runner.run("hi")
    assert model.saw_callback == [False, True]
    assert deltas == ["Hel", "lo"]
    assert result.output == "Hello"


async def test_a_custom_executor_with_model_request_runs_a_whole_turn() -> None:
    """An executor built from ``model_request`` and ``run_tool`` completes a tool turn."""
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ProposedToolCall(id="c1", name="echo", arguments='{"text": "x"}')]
            ),
            ModelResponse(text="done"),
        ]
    )

    async def executor(ctx: DispatchContext) -> None:
        response = await model.complete(ctx.model_request())
        if not response.tool_calls:
            await ctx.store_message(Message(role="assistant", content=response.text or ""))
            ctx.ack()
            return
        ids = tuple(p.id for p in response.tool_calls)
        await ctx.store_message(Message(role="assistant", content="", tool_call_ids=ids))
        for p in response.tool_calls:
            await ctx.store_tool_call(await ctx.run_tool(p.name, p.arguments, call_id=p.id))

    result = await TurnRunner(executor=executor, tools=[echo]).run("go")
    assert result.status == "completed"
    assert result.output == "done"
    assert [c.results for c in result.tool_calls] == ["x"]
    assert [c.id for c in model.requests[1].tool_calls] == ["c1"]


TEXT = st.text(max_size=20)
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), TEXT)


@settings(max_examples=100, deadline=None)
@given(content=TEXT, ids=st.lists(st.text(min_size=1, max_size=8), max_size=3))
def test_the_fast_message_is_a_valid_message(content: str, ids: list[str]) -> None:
    """`new_message` makes what ``Message(...)`` makes: same fields, equal, and replaceable."""
    fast = new_message("assistant", content, tuple(ids))
    checked = Message(
        role="assistant",
        content=content,
        tool_call_ids=tuple(ids),
        id=fast.id,
        created_at=fast.created_at,
    )
    assert fast == checked
    assert repr(fast) == repr(checked)
    assert dataclasses.replace(fast, content="other").content == "other"
    assert fast.created_at.tzinfo is not None
    assert fast.id.startswith("msg_")


@settings(max_examples=100, deadline=None)
@given(
    args=st.dictionaries(st.text(max_size=6), JSON_SCALARS, max_size=4),
    result=TEXT,
    is_error=st.booleans(),
)
def test_the_fast_record_is_the_checked_record(
    args: dict[str, object], result: str, is_error: bool
) -> None:
    """`build_record` makes what ``ToolCall.completed`` makes from the same parts."""
    checksum = tool_call_checksum("echo", args)
    fast = build_record(
        "c1", "echo", args, checksum, result, is_error, inline=True, ran=not is_error
    )
    checked = ToolCall.completed(
        id="c1", tool="echo", args=args, results=result, is_error=is_error, inline=True
    )
    same_times = dataclasses.replace(
        fast,
        created_at=checked.created_at,
        updated_at=checked.updated_at,
        completed_at=checked.completed_at,
    )
    assert same_times == checked
    assert fast.args == args
    assert fast.checksum == checked.checksum
