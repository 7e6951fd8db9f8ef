"""Event order and the runner's listeners: typed `on`, `on_any`, unsubscribe, sync/async, errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import Middleware
from pipeline import Tool, ToolLoopExecutor, TurnRunner
from pipeline.events import (
    DispatchEnd,
    DispatchStart,
    Event,
    IterationEnd,
    IterationStart,
    Log,
    MessageStored,
    ToolCallStored,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel


def echo_steps(n_calls: int) -> list[ModelResponse]:
    """``n_calls`` iterations that each call ``echo``, then a final answer."""
    steps = [
        ModelResponse(
            tool_calls=[
                ProposedToolCall(id=f"c{i}", name="echo", arguments=json.dumps({"text": str(i)}))
            ]
        )
        for i in range(n_calls)
    ]
    return [*steps, ModelResponse(text="final")]


def make_runner(echo_tool: Tool[BaseModel], n_calls: int = 2) -> TurnRunner:
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(echo_steps(n_calls))), tools=[echo_tool]
    )


LIFECYCLE = (TurnStart, DispatchStart, IterationStart, IterationEnd, DispatchEnd, TurnEnd)


async def test_happy_path_events_come_in_lifecycle_order(
    echo_tool: Tool[BaseModel], record: Callable[[TurnRunner], list[Event]]
) -> None:
    """TurnStart < DispatchStart < IterationStart/End pairs < DispatchEnd < TurnEnd."""
    runner = make_runner(echo_tool, n_calls=2)
    events = record(runner)
    result = await runner.run("hi")
    assert result.status == "completed"
    lifecycle = [type(e).__name__ for e in events if isinstance(e, LIFECYCLE)]
    assert lifecycle == [
        "TurnStart",
        "DispatchStart",
        "IterationStart",
        "IterationEnd",
        "IterationStart",
        "IterationEnd",
        "IterationStart",
        "IterationEnd",
        "DispatchEnd",
        "TurnEnd",
    ]
    iterations = [e.iteration for e in events if isinstance(e, (IterationStart, IterationEnd))]
    assert iterations == [0, 0, 1, 1, 2, 2]
    assert all(e.turn_id == result.turn_id for e in events)
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.status == "completed"
    assert end.duration_ms >= 0
    dispatch_end = next(e for e in events if isinstance(e, DispatchEnd))
    assert (dispatch_end.status, dispatch_end.iterations, dispatch_end.error) == ("ack", 3, None)
    timestamps = [e.timestamp for e in events]
    assert timestamps == sorted(timestamps)


async def test_tool_events_fall_inside_their_iteration(
    echo_tool: Tool[BaseModel], record: Callable[[TurnRunner], list[Event]]
) -> None:
    """Tool execution and storage events of a call sit between its IterationStart and End."""
    runner = make_runner(echo_tool, n_calls=1)
    events = record(runner)
    await runner.run("hi")
    names = [type(e).__name__ for e in events]
    first_iteration = names[names.index("IterationStart") : names.index("IterationEnd") + 1]
    assert first_iteration == [
        "IterationStart",
        "MessageStored",
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "ToolCallStored",
        "IterationEnd",
    ]
    stored = [e for e in events if isinstance(e, MessageStored)]
    assert [m.message.role for m in stored] == ["user", "assistant", "assistant"]


async def test_on_delivers_only_the_subscribed_type(echo_tool: Tool[BaseModel]) -> None:
    """runner.on(EventType, handler) calls the handler with that event type only."""
    runner = make_runner(echo_tool, n_calls=1)
    starts: list[ToolExecutionStart] = []
    stored: list[ToolCallStored] = []
    runner.on(ToolExecutionStart, starts.append)
    runner.on(ToolCallStored, stored.append)
    result = await runner.run("hi")
    assert [e.tool_name for e in starts] == ["echo"]
    assert [e.call.id for e in stored] == [c.id for c in result.tool_calls]


async def test_on_base_event_type_receives_every_event(echo_tool: Tool[BaseModel]) -> None:
    """Subscribing to the Event base class receives subclasses too, like on_any."""
    runner = make_runner(echo_tool, n_calls=1)
    via_on: list[Event] = []
    via_any: list[Event] = []
    runner.on(Event, via_on.append)
    runner.on_any(via_any.append)
    await runner.run("hi")
    assert via_on == via_any
    assert len(via_on) > 6


async def test_listeners_run_in_subscription_order(echo_tool: Tool[BaseModel]) -> None:
    """Typed and catch-all listeners are called in the order they subscribed."""
    runner = make_runner(echo_tool, n_calls=0)
    calls: list[str] = []
    runner.on_any(lambda e: calls.append("any1") if isinstance(e, TurnStart) else None)
    runner.on(TurnStart, lambda e: calls.append("typed"))
    runner.on_any(lambda e: calls.append("any2") if isinstance(e, TurnStart) else None)
    await runner.run("hi")
    assert calls == ["any1", "typed", "any2"]


async def test_unsubscribe_stops_delivery(echo_tool: Tool[BaseModel]) -> None:
    """Calling the returned unsubscribe stops a typed and a catch-all listener."""
    runner = make_runner(echo_tool, n_calls=0)
    typed: list[TurnStart] = []
    every: list[Event] = []
    off_typed = runner.on(TurnStart, typed.append)
    off_any = runner.on_any(every.append)
    await runner.run("one")
    assert len(typed) == 1
    seen = len(every)
    off_typed()
    off_any()
    off_any()  # unsubscribing twice is harmless
    await runner.run("two")
    assert len(typed) == 1
    assert len(every) == seen


async def test_async_listeners_are_awaited_before_run_returns(echo_tool: Tool[BaseModel]) -> None:
    """An async listener's work is finished by the time run() returns."""
    runner = make_runner(echo_tool, n_calls=1)
    finished: list[str] = []

    async def slow_listener(event: Event) -> None:
        await asyncio.sleep(0.01)
        finished.append(type(event).__name__)

    runner.on_any(slow_listener)
    await runner.run("hi")
    assert "TurnEnd" in finished
    assert "ToolCallStored" in finished


async def test_sync_listener_runs_at_emit_time(echo_tool: Tool[BaseModel]) -> None:
    """A sync listener has seen TurnStart before the first middleware runs."""
    seen: list[str] = []

    async def first(ctx: Any, call_next: Any) -> None:
        seen.append("middleware")
        await call_next()

    plain = Middleware("plain")
    plain.turn_input(first)
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([])), tools=[echo_tool], middleware=[plain]
    )
    runner.on(TurnStart, lambda e: seen.append("listener"))
    await runner.run("hi")
    assert seen == ["listener", "middleware"]


async def test_raising_listener_is_reported_as_log_warning_and_turn_completes(
    echo_tool: Tool[BaseModel],
) -> None:
    """A sync or async listener that raises becomes a Log warning; the turn still completes."""
    runner = make_runner(echo_tool, n_calls=1)

    def bad_sync(event: TurnStart) -> None:
        raise RuntimeError("sync listener broke")

    async def bad_async(event: ToolCallStored) -> None:
        raise ValueError("async listener broke")

    logs: list[Log] = []
    after: list[Event] = []
    runner.on(TurnStart, bad_sync)
    runner.on(ToolCallStored, bad_async)
    runner.on(Log, logs.append)
    runner.on_any(after.append)
    result = await runner.run("hi")
    assert result.status == "completed"
    assert result.errors == ()
    warnings = [e for e in logs if e.kind == "listener_error"]
    assert {e.level for e in warnings} == {"warning"}
    messages = " | ".join(e.message for e in warnings)
    assert "sync listener broke" in messages
    assert "async listener broke" in messages
    assert {e.payload["event"] for e in warnings} == {"TurnStart", "ToolCallStored"}
    assert any(isinstance(e, TurnEnd) for e in after)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_listener_that_always_raises_is_reported_once_per_event(
    echo_tool: Tool[BaseModel], kind: str
) -> None:
    """A catch-all listener failing on everything, its own reports included, never cascades."""
    runner = make_runner(echo_tool, n_calls=1)
    seen: list[Event] = []

    def broken(event: Event) -> None:
        seen.append(event)
        raise RuntimeError("always broken")

    async def broken_async(event: Event) -> None:
        broken(event)

    runner.on_any(broken if kind == "sync" else broken_async)
    result = await runner.run("hi")
    assert result.status == "completed"
    originals = [e for e in seen if not isinstance(e, Log)]
    reports = [e for e in seen if isinstance(e, Log)]
    assert all(e.kind == "listener_error" for e in reports)
    assert len(reports) == len(originals)


async def test_concurrent_turns_events_carry_their_own_turn_id(
    echo_tool: Tool[BaseModel], record: Callable[[TurnRunner], list[Event]]
) -> None:
    """Events of concurrent turns on one runner each carry their own turn's id."""
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), tools=[echo_tool])
    events = record(runner)
    results = await asyncio.gather(*(runner.run(f"q{i}") for i in range(5)))
    ids = {r.turn_id for r in results}
    assert len(ids) == 5
    for result in results:
        mine = [e for e in events if e.turn_id == result.turn_id]
        assert [type(e) for e in mine if isinstance(e, (TurnStart, TurnEnd))] == [
            TurnStart,
            TurnEnd,
        ]
        start = next(e for e in mine if isinstance(e, TurnStart))
        assert start.input == result.messages[0].content


async def test_tool_execution_end_reports_duration_and_error_flag(
    echo_tool: Tool[BaseModel], boom_tool: Tool[BaseModel]
) -> None:
    """ToolExecutionEnd carries the duration and is_error for successful and failing calls."""
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ProposedToolCall(id="a", name="echo", arguments='{"text": "x"}'),
                    ProposedToolCall(id="b", name="boom", arguments="{}"),
                ]
            )
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool, boom_tool])
    ends: list[ToolExecutionEnd] = []
    runner.on(ToolExecutionEnd, ends.append)
    await runner.run("hi")
    assert [(e.tool_name, e.is_error) for e in ends] == [("echo", False), ("boom", True)]
    assert all(e.duration_ms >= 0 for e in ends)


async def test_an_event_nobody_takes_is_never_built(
    echo_tool: Tool[BaseModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With listeners for the end events only, the start events are not even constructed;
    a listener added later gets them from its next turn on."""
    import pipeline._dispatch_loop
    import pipeline._tool

    built: list[str] = []

    def counting(cls: type[Event]) -> type[Event]:
        """``cls`` under its own name, counting the events built."""

        def init(self: Event, **fields: Any) -> None:
            built.append(cls.__name__)
            cls.__init__(self, **fields)

        return type(cls.__name__, (cls,), {"__slots__": (), "__init__": init})

    monkeypatch.setattr(pipeline._dispatch_loop, "IterationStart", counting(IterationStart))
    monkeypatch.setattr(pipeline._tool, "ToolExecutionStart", counting(ToolExecutionStart))
    model = ScriptedModel([*echo_steps(1), *echo_steps(1)])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool])
    ends: list[Event] = []
    runner.on(IterationEnd, ends.append)
    runner.on(ToolExecutionEnd, ends.append)
    await runner.run("quiet")
    assert built == []
    assert [type(e).__name__ for e in ends] == ["ToolExecutionEnd", "IterationEnd", "IterationEnd"]
    starts: list[Event] = []
    runner.on(IterationStart, starts.append)
    runner.on(ToolExecutionStart, starts.append)
    await runner.run("heard")
    names = ["IterationStart", "ToolExecutionStart", "IterationStart"]
    assert built == names
    assert [type(e).__name__ for e in starts] == names


@pytest.mark.parametrize(("listened", "built"), [(TurnEnd, 0), (ToolExecutionEnd, 2)])
async def test_a_call_builds_its_execution_end_event_only_when_a_listener_takes_it(
    echo_tool: Tool[BaseModel],
    monkeypatch: pytest.MonkeyPatch,
    listened: type[Event],
    built: int,
) -> None:
    """A listener of another event type (a hosted runner's `GateOpened` one, a `TurnEnd` one)
    does not make every call build events nobody takes; a listener of the event does."""
    import pipeline._tool as tool_module

    made: list[Event] = []
    real = tool_module._end

    def counting(*args: Any) -> ToolExecutionEnd:
        event = real(*args)
        made.append(event)
        return event

    monkeypatch.setattr(tool_module, "_end", counting)
    runner = make_runner(echo_tool, n_calls=2)
    taken: list[Event] = []
    runner.on(listened, taken.append)
    result = await runner.run("hi")
    assert result.status == "completed"
    assert len(made) == built
    assert len(taken) == (1 if listened is TurnEnd else 2)
