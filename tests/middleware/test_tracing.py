"""`Tracing`: OpenTelemetry span trees for real turns, errors, aborts, payloads, concurrency."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from middleware import Middleware, RepetitionDetector, ToolCallLimit, ToolPolicy, Tracing
from pipeline import DispatchContext, ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.errors import InvalidMiddlewareConfigError, MissingExtraError
from pipeline.events import (
    DispatchStart,
    Event,
    IterationStart,
    Log,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel

# -- tools, models, helpers ---------------------------------------------------------------------


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"results for {q}"


@tool
def explode(n: int) -> str:
    """Always fail."""
    raise RuntimeError("kaboom")


@tool
async def nap(seconds: float) -> str:
    """Sleep, yielding to other turns."""
    await asyncio.sleep(seconds)
    return "rested"


def propose(name: str, args: dict[str, Any] | str, call_id: str) -> ProposedToolCall:
    text = args if isinstance(args, str) else json.dumps(args)
    return ProposedToolCall(id=call_id, name=name, arguments=text)


def step(*calls: ProposedToolCall) -> ModelResponse:
    return ModelResponse(tool_calls=calls)


class Started(SpanProcessor):
    """Remembers every span started, so a test can check that each one was ended."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.spans.append(span)


@dataclass
class Traces:
    """A private tracer provider with an in-memory exporter (never the global provider)."""

    provider: TracerProvider = field(default_factory=TracerProvider)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    started: Started = field(default_factory=Started)

    def __post_init__(self) -> None:
        self.provider.add_span_processor(self.started)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}"
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        for other in self.spans():
            if other.context is not None and other.context.span_id == span.parent.span_id:
                return other
        raise AssertionError(f"the parent of {span.name!r} was never exported")

    def tree(self) -> list[tuple[str, str | None]]:
        """Every exported span as ``(name, parent name)``, sorted."""
        pairs = []
        for span in self.spans():
            parent = self.parent_of(span)
            pairs.append((span.name, None if parent is None else parent.name))
        return sorted(pairs, key=lambda pair: (pair[0], pair[1] or ""))

    def assert_all_ended(self) -> None:
        assert self.started.spans, "no span was started"
        assert [s.name for s in self.started.spans if s.end_time is None] == []
        assert len(self.spans()) == len(self.started.spans)


@pytest.fixture
def traces() -> Traces:
    return Traces()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def decided(event: Any) -> dict[str, Any]:
    """A span event's attributes."""
    return dict(event.attributes or {})


def ns(moment: datetime) -> int:
    return ((moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)) * 1000


def runner_for(
    tracing: Tracing,
    steps: Sequence[ModelResponse],
    *,
    middleware: Sequence[object] = (),
    **options: Any,
) -> TurnRunner:
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(steps), **options.pop("executor_options", {})),
        tools=[search, explode, nap],
        middleware=[tracing, *middleware],
        **options,
    )


def watch_set() -> Middleware:
    """A timed middleware set with a hook on each turn stage and one dispatch middleware."""
    watch = Middleware("watch", timed=True)

    @watch.turn_input
    def greet(ctx: TurnContext) -> None:
        ctx.stash.set("greeted", True)

    @watch.dispatch_output
    async def look(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    @watch.turn_output
    def bye(ctx: TurnContext) -> None:
        ctx.stash.set("done", True)

    return watch


# -- the span tree ------------------------------------------------------------------------------


async def test_a_scripted_turn_yields_exactly_the_expected_span_tree(traces: Traces) -> None:
    """One tool call then an answer: turn, middleware, dispatch, two iterations and one tool."""
    tracing = Tracing(traces.provider)
    runner = runner_for(
        tracing,
        [step(propose("search", {"q": "otel"}, "call_1")), ModelResponse(text="found it")],
        middleware=[watch_set()],
    )
    result = await runner.run("find otel", conversation_id="conv-1")

    assert result.status == "completed"
    assert traces.tree() == [
        ("execute_tool search", "loopware.iteration"),
        ("invoke_agent", None),
        ("loopware.dispatch", "invoke_agent"),
        ("loopware.iteration", "loopware.dispatch"),
        ("loopware.iteration", "loopware.dispatch"),
        ("loopware.middleware watch.bye", "invoke_agent"),
        ("loopware.middleware watch.greet", "invoke_agent"),
        ("loopware.middleware watch.look", "loopware.iteration"),
    ]
    turn = traces.one("invoke_agent")
    assert attrs(turn) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": "conv-1",
        "loopware.turn.id": result.turn_id,
        "loopware.turn.status": "completed",
    }
    assert turn.status.status_code is StatusCode.UNSET
    assert {s.context.trace_id for s in traces.spans() if s.context} == {turn.context.trace_id}

    dispatch = traces.one("loopware.dispatch")
    assert attrs(dispatch)["loopware.dispatch.status"] == "ack"
    assert attrs(dispatch)["loopware.dispatch.iterations"] == 2
    first, second = sorted(traces.named("loopware.iteration"), key=lambda s: s.start_time or 0)
    assert (attrs(first)["loopware.iteration"], attrs(second)["loopware.iteration"]) == (0, 1)

    search_span = traces.one("execute_tool search")
    assert traces.parent_of(search_span) is first
    assert attrs(search_span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_1",
        "loopware.turn.id": result.turn_id,
        "loopware.tool.checksum": result.tool_calls[0].checksum,
        "loopware.tool.verdict": "allowed",
        "loopware.tool.ran": True,
        "loopware.tool.duration_ms": result.tool_calls[0].duration_ms,
    }
    assert search_span.events == ()  # no decision was taken about the call
    look = traces.one("loopware.middleware watch.look")
    assert traces.parent_of(look) is first  # the second iteration acked in the executor
    assert attrs(look)["loopware.middleware.name"] == "watch.look"
    assert attrs(look)["loopware.stage"] == "dispatch_output"
    assert attrs(look)["loopware.middleware.total_ms"] >= attrs(look)["loopware.middleware.self_ms"]
    assert attrs(traces.one("loopware.middleware watch.greet"))["loopware.stage"] == "turn_input"
    traces.assert_all_ended()


async def test_spans_take_their_times_from_the_events(traces: Traces) -> None:
    """Span start and end times are the events' timestamps, and children nest in parents."""
    tracing = Tracing(traces.provider)
    runner = runner_for(tracing, [step(propose("search", {"q": "t"}, "c1"))])
    seen: list[Event] = []
    runner.on_any(seen.append)
    await runner.run("time it")

    def event(kind: type[Event]) -> Any:
        return next(e for e in seen if type(e) is kind)

    turn, tool_span = traces.one("invoke_agent"), traces.one("execute_tool search")
    assert turn.start_time == ns(event(TurnStart).timestamp)
    assert turn.end_time == ns(event(TurnEnd).timestamp)
    assert traces.one("loopware.dispatch").start_time == ns(event(DispatchStart).timestamp)
    assert tool_span.start_time == ns(event(ToolExecutionStart).started_at)
    assert tool_span.end_time == ns(event(ToolExecutionEnd).timestamp)
    for span in traces.spans():
        parent = traces.parent_of(span)
        if parent is not None:
            assert parent.start_time is not None
            assert span.start_time is not None
            assert parent.end_time is not None
            assert span.end_time is not None
            assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time


async def test_middleware_without_timed_get_no_span(traces: Traces) -> None:
    """Middleware spans are built from timing logs, so only ``timed=True`` ones appear."""
    quiet = Middleware("quiet")

    @quiet.dispatch_output
    async def look(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    runner = runner_for(
        Tracing(traces.provider), [step(propose("search", {"q": "x"}, "c1"))], middleware=[quiet]
    )
    await runner.run("hi")
    assert [s.name for s in traces.spans() if s.name.startswith("loopware.middleware")] == []
    assert len(traces.named("execute_tool search")) == 1


async def test_the_turn_span_joins_the_callers_current_span(traces: Traces) -> None:
    """The turn span is a child of the span current where ``run()`` is awaited."""
    runner = runner_for(Tracing(traces.provider), [ModelResponse(text="hi")])
    tracer = traces.provider.get_tracer("test")
    with tracer.start_as_current_span("request"):
        await runner.run("hello")
    request = traces.one("request")
    assert traces.parent_of(traces.one("invoke_agent")) is request


# -- payloads -----------------------------------------------------------------------------------

PAYLOAD_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


async def test_payloads_are_omitted_by_default(traces: Traces) -> None:
    """Without ``capture_payloads`` no span carries the input, answer, arguments or results."""
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("search", {"q": "secret"}, "c1")), ModelResponse(text="the answer")],
    )
    await runner.run("my secret question")
    assert traces.spans()
    for span in traces.spans():
        assert PAYLOAD_KEYS.isdisjoint(attrs(span)), span.name
        assert "secret" not in json.dumps(attrs(span))


async def test_payloads_are_recorded_when_enabled(traces: Traces) -> None:
    """``capture_payloads=True`` records input and answer messages, tool arguments and results."""
    tracing = Tracing(traces.provider, capture_payloads=True)
    assert tracing.capture_payloads is True
    runner = runner_for(
        tracing,
        [
            step(propose("search", {"q": "otel"}, "c1"), propose("nope", {"x": 1}, "c2")),
            ModelResponse(text="the answer"),
        ],
    )
    await runner.run("my question")
    turn = attrs(traces.one("invoke_agent"))
    assert json.loads(turn["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "my question"}]}
    ]
    assert json.loads(turn["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "the answer"}],
            "finish_reason": "stop",
        }
    ]
    searched = attrs(traces.one("execute_tool search"))
    assert json.loads(searched["gen_ai.tool.call.arguments"]) == {"q": "otel"}
    assert searched["gen_ai.tool.call.result"] == "results for otel"
    unknown = attrs(traces.one("execute_tool nope"))
    assert json.loads(unknown["gen_ai.tool.call.arguments"]) == {"x": 1}


# -- errors -------------------------------------------------------------------------------------


async def test_a_failing_tool_sets_error_status_on_its_span_only(traces: Traces) -> None:
    """A handler that raises marks its tool span ERROR; the turn itself still completes."""
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("explode", {"n": 1}, "c1"), propose("search", {"q": "ok"}, "c2"))],
    )
    result = await runner.run("try")
    assert result.status == "completed"
    failed = traces.one("execute_tool explode")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description is not None
    assert failed.status.description.startswith("E_TOOL_DOWNSTREAM_ERROR: ")
    assert "kaboom" in failed.status.description
    assert attrs(failed)["error.type"] == "E_TOOL_DOWNSTREAM_ERROR"
    assert attrs(failed)["gen_ai.tool.call.id"] == "c1"
    assert traces.one("execute_tool search").status.status_code is StatusCode.UNSET
    assert traces.one("invoke_agent").status.status_code is StatusCode.UNSET


@pytest.mark.parametrize(
    ("name", "arguments", "error_type"),
    [
        ("nope", "{}", "E_TOOL_NOT_FOUND"),
        ("explode", '{"n": "many"}', "E_INVALID_TOOL_ARGS"),
        ("search", "{not json", "E_INVALID_TOOL_ARGS"),
    ],
    ids=["unknown-tool", "schema-error", "bad-json"],
)
async def test_calls_refused_before_their_handler_ran_get_an_error_span(
    traces: Traces, name: str, arguments: str, error_type: str
) -> None:
    """A call stored as an error without running (no execution events) still gets a tool span,
    which says it was invalid and never ran, and why (the loop's own decision)."""
    runner = runner_for(Tracing(traces.provider), [step(propose(name, arguments, "bad_1"))])
    result = await runner.run("go")
    span = traces.one(f"execute_tool {name}")
    assert attrs(span)["loopware.tool.verdict"] == "invalid"
    assert attrs(span)["loopware.tool.ran"] is False
    assert "loopware.tool.duration_ms" not in attrs(span)
    [decision] = span.events
    assert decision.name == "loopware.decision"
    recorded = result.tool_calls[0].decisions[0].as_dict()
    assert decided(decision) == {f"loopware.decision.{k}": v for k, v in recorded.items()}
    assert decided(decision)["loopware.decision.action"] == "invalid"
    parent = traces.parent_of(span)
    assert parent is not None
    assert parent.name == "loopware.iteration"
    assert attrs(parent)["loopware.iteration"] == 0
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == error_type
    assert attrs(span)["gen_ai.tool.call.id"] == "bad_1"
    traces.assert_all_ended()


async def test_a_failed_turn_sets_error_status_up_the_tree(traces: Traces) -> None:
    """A raising dispatch middleware marks its iteration, the nacked dispatch and the turn ERROR."""
    broken = Middleware("broken")

    @broken.dispatch_output
    async def fail(ctx: DispatchContext, call_next: CallNext) -> None:
        raise ValueError("middleware bug")

    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("search", {"q": "x"}, "c1"))],
        middleware=[broken],
    )
    result = await runner.run("go")
    assert result.status == "failed"

    iteration = traces.one("loopware.iteration")
    assert iteration.status.status_code is StatusCode.ERROR
    assert attrs(iteration)["error.type"] == "E_DISPATCH_PIPELINE_ERROR"
    [exception] = [e for e in iteration.events if e.name == "exception"]
    assert dict(exception.attributes or {})["loopware.stage"] == "dispatch_output"
    assert "middleware bug" in str(dict(exception.attributes or {})["exception.message"])

    dispatch = traces.one("loopware.dispatch")
    assert dispatch.status.status_code is StatusCode.ERROR
    assert attrs(dispatch)["loopware.dispatch.status"] == "nack"

    turn = traces.one("invoke_agent")
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.status.description is not None
    assert turn.status.description.startswith("E_DISPATCH_PIPELINE_ERROR: ")
    assert attrs(turn)["error.type"] == "E_DISPATCH_PIPELINE_ERROR"
    assert attrs(turn)["loopware.turn.status"] == "failed"
    traces.assert_all_ended()


async def test_a_turn_input_failure_marks_the_turn_span_and_opens_no_dispatch(
    traces: Traces,
) -> None:
    """An error in a turn stage is recorded on the turn span; no dispatch span is started."""
    broken = Middleware("broken")

    @broken.turn_input
    def fail(ctx: TurnContext) -> None:
        raise RuntimeError("no entry")

    runner = runner_for(Tracing(traces.provider), [], middleware=[broken])
    assert (await runner.run("go")).status == "failed"
    assert traces.tree() == [("invoke_agent", None)]
    turn = traces.one("invoke_agent")
    assert turn.status.status_code is StatusCode.ERROR
    assert attrs(turn)["error.type"] == "E_INPUT_PIPELINE_ERROR"
    assert [e.name for e in turn.events] == ["exception"]


async def test_the_iteration_limit_nacks_the_dispatch_span(traces: Traces) -> None:
    """A dispatch that hits ``max_iterations`` ends ERROR with ``E_ITERATION_LIMIT``."""
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("search", {"q": str(i)}, f"c{i}")) for i in range(3)],
        max_iterations=2,
    )
    assert (await runner.run("loop")).status == "failed"
    dispatch = traces.one("loopware.dispatch")
    assert attrs(dispatch)["error.type"] == "E_ITERATION_LIMIT"
    assert len(traces.named("loopware.iteration")) == 2
    assert attrs(traces.one("invoke_agent"))["error.type"] == "E_ITERATION_LIMIT"


# -- policy decisions ---------------------------------------------------------------------------


async def test_a_calls_decisions_become_events_on_its_tool_span(traces: Traces) -> None:
    """Each decision on a call's record is a ``loopware.decision`` event on the call's span,
    with the verdict and ``ran`` as attributes: a warned repeat ran, a blocked one did not."""
    same = '{"q": "again"}'
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("search", same, "c")), step(propose("search", same, "d"))],
        middleware=[RepetitionDetector(threshold=2, on_repeat="warn")],
    )
    result = await runner.run("repeat")
    spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in traces.named("execute_tool search")}
    assert spans["c"].events == ()
    [event] = spans["d"].events
    warned = result.tool_calls[1].decisions[0]
    assert event.name == "loopware.decision"
    assert decided(event) == {
        "loopware.decision.policy": "loopware.repetition",
        "loopware.decision.action": "warned",
        "loopware.decision.reason": warned.reason,
        "loopware.decision.when": "before",
    }
    assert (attrs(spans["d"])["loopware.tool.verdict"], attrs(spans["d"])["loopware.tool.ran"]) == (
        "warned",
        True,
    )
    assert spans["d"].status.status_code is StatusCode.UNSET
    iterations = traces.named("loopware.iteration")
    assert all(i.events == () for i in iterations)  # nothing was decided about a tool


async def test_a_denied_call_span_says_denied_and_not_run(traces: Traces) -> None:
    """A call a policy denied has an error span with the record's verdict, ``ran`` False and
    the policy's decision as an event; its ``error.type`` is the code the model read."""
    same = '{"q": "again"}'
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("search", same, "c")), step(propose("search", same, "d"))],
        middleware=[RepetitionDetector(threshold=2)],
    )
    result = await runner.run("repeat")
    spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in traces.named("execute_tool search")}
    blocked = spans["d"]
    assert (attrs(blocked)["loopware.tool.verdict"], attrs(blocked)["loopware.tool.ran"]) == (
        "denied",
        False,
    )
    assert attrs(blocked)["error.type"] == "E_CALL_DENIED"
    assert blocked.status.status_code is StatusCode.ERROR
    assert [decided(e)["loopware.decision.action"] for e in blocked.events] == ["denied"]
    assert result.tool_calls[1].verdict == "denied"


async def test_tool_decisions_become_events_on_the_iteration_span(traces: Traces) -> None:
    """A limit hiding a tool is a ``loopware.tool_decision`` event on the iteration it was
    taken in, naming the tool and the call that used the limit up; the next call to the tool
    is denied, and its span says so."""
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("search", {"q": "1"}, "c")), step(propose("search", {"q": "2"}, "d"))],
        middleware=[ToolCallLimit({"search": 1})],
    )
    result = await runner.run("twice")
    first, second, _ = sorted(traces.named("loopware.iteration"), key=lambda s: s.start_time or 0)
    [event] = first.events
    assert event.name == "loopware.tool_decision"
    [hidden] = result.tool_decisions
    assert decided(event) == {
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.id": "c",
        "loopware.decision.policy": "loopware.limit",
        "loopware.decision.action": "hidden",
        "loopware.decision.reason": hidden.reason,
    }
    assert second.events == ()
    spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in traces.named("execute_tool search")}
    assert attrs(spans["c"])["loopware.tool.verdict"] == "allowed"
    assert attrs(spans["d"])["loopware.tool.verdict"] == "denied"
    assert attrs(spans["d"])["error.type"] == "E_TOOL_UNAVAILABLE"


async def test_a_tool_withdrawn_at_the_turns_start_is_an_event_on_the_turn_span(
    traces: Traces,
) -> None:
    """`ToolPolicy` withdrawing a tool before any dispatch is an event on the turn span."""
    runner = runner_for(
        Tracing(traces.provider),
        [ModelResponse(text="no tools needed")],
        middleware=[ToolPolicy(deny=["explode"])],
    )
    await runner.run("hi")
    [event] = traces.one("invoke_agent").events
    assert event.name == "loopware.tool_decision"
    assert decided(event)["gen_ai.tool.name"] == "explode"
    assert decided(event)["loopware.decision.action"] == "withdrawn"
    assert "gen_ai.tool.call.id" not in decided(event)


# -- aborts and missing end events --------------------------------------------------------------


async def test_an_aborted_turn_ends_every_span_without_error(traces: Traces) -> None:
    """Aborting a turn mid-tool still ends each span; an abort is not an error."""
    tracing = Tracing(traces.provider)
    runner = runner_for(tracing, [step(propose("nap", {"seconds": 30}, "c1"))])
    started = asyncio.Event()
    runner.on(ToolExecutionStart, lambda event: started.set())
    handle = runner.start("sleep")
    await asyncio.wait_for(started.wait(), 5)
    handle.abort("user left")
    result = await asyncio.wait_for(handle, 5)

    assert result.status == "aborted"
    traces.assert_all_ended()
    assert sorted(name for name, _ in traces.tree()) == [
        "execute_tool nap",
        "invoke_agent",
        "loopware.dispatch",
        "loopware.iteration",
    ]
    assert attrs(traces.one("invoke_agent"))["loopware.turn.status"] == "aborted"
    assert attrs(traces.one("loopware.dispatch"))["loopware.dispatch.status"] == "aborted"
    napped = traces.one("execute_tool nap")
    # the cancelled call is answered with an error record: its span ends
    # with that record; the turn, dispatch and iteration are not errors
    assert attrs(napped)["gen_ai.tool.call.id"] == "c1"
    assert napped.status.status_code is StatusCode.ERROR
    others = [s for s in traces.spans() if s is not napped]
    assert all(s.status.status_code is StatusCode.UNSET for s in others)
    assert tracing._turns == {}


class Source:
    """A bare event source: lets a test deliver events the runner would never send."""

    def __init__(self) -> None:
        self.handlers: list[tuple[type[Event], Callable[[Any], object]]] = []

    def on(self, event_type: type[Any], handler: Callable[[Any], object]) -> Callable[[], None]:
        self.handlers.append((event_type, handler))
        return lambda: None

    def on_any(self, handler: Callable[[Event], object]) -> Callable[[], None]:
        return self.on(Event, handler)

    def emit(self, *events: Event) -> None:
        for event in events:
            for kind, handler in self.handlers:
                if isinstance(event, kind):
                    handler(event)


def test_a_turn_ending_without_inner_end_events_still_ends_every_span(traces: Traces) -> None:
    """``TurnEnd`` ends the dispatch, iteration and tool spans left open, marked incomplete."""
    tracing = Tracing(traces.provider)
    source = Source()
    tracing.observe(source)
    source.emit(
        TurnStart(turn_id="t1", input="hi"),
        DispatchStart(turn_id="t1", dispatch_id="d1"),
        IterationStart(turn_id="t1", dispatch_id="d1", iteration=0),
        ToolExecutionStart(
            turn_id="t1",
            tool_name="search",
            call_id="call_1",
            checksum="x" * 64,
            args=None,
            started_at=datetime.now(UTC),
        ),
    )
    assert "turns_in_flight=1" in repr(tracing)
    source.emit(TurnEnd(turn_id="t1", status="aborted", duration_ms=1.0))

    traces.assert_all_ended()
    assert traces.tree() == [
        ("execute_tool search", "loopware.iteration"),
        ("invoke_agent", None),
        ("loopware.dispatch", "invoke_agent"),
        ("loopware.iteration", "loopware.dispatch"),
    ]
    for name in ("loopware.dispatch", "loopware.iteration", "execute_tool search"):
        assert attrs(traces.one(name))["loopware.incomplete"] is True
    assert "loopware.incomplete" not in attrs(traces.one("invoke_agent"))
    assert tracing._turns == {}


def test_events_of_unknown_turns_and_malformed_logs_are_ignored(traces: Traces) -> None:
    """Events of a turn whose start was not seen, and odd timing payloads, never crash."""
    tracing = Tracing(traces.provider)
    source = Source()
    tracing.observe(source)
    source.emit(
        DispatchStart(turn_id="ghost", dispatch_id="d"),
        TurnEnd(turn_id="ghost", status="completed", duration_ms=1.0),
        TurnStart(turn_id="t2", input="hi"),
        Log(turn_id="t2", level="debug", kind="middleware.timing", message="", payload={}),
        Log(
            turn_id="t2",
            level="debug",
            kind="middleware.timing",
            message="",
            payload={"middleware": "m", "stage": "turn_input", "self_ms": "1", "total_ms": 2},
        ),
        Log(
            turn_id="t2",
            level="debug",
            kind="middleware.timing",
            message="",
            payload={"middleware": "m", "stage": "turn_input", "self_ms": 1, "total_ms": 1e400},
        ),
        Log(turn_id="t2", level="info", kind="policy.decision", message="", payload={"x": []}),
        TurnEnd(turn_id="t2", status="completed", duration_ms=1.0),
    )
    assert traces.tree() == [("invoke_agent", None)]
    assert traces.one("invoke_agent").events == ()  # a log is never read as a decision
    assert tracing._turns == {}


# -- matching tool spans to calls ---------------------------------------------------------------


async def test_identical_parallel_calls_get_one_span_each(traces: Traces) -> None:
    """Two concurrent calls with the same arguments share a checksum but get separate spans."""
    runner = runner_for(
        Tracing(traces.provider),
        [step(propose("nap", {"seconds": 0}, "a"), propose("nap", {"seconds": 0}, "b"))],
        executor_options={"parallel_tool_calls": True},
    )
    await runner.run("twice")
    spans = traces.named("execute_tool nap")
    assert sorted(attrs(s)["gen_ai.tool.call.id"] for s in spans) == ["a", "b"]
    traces.assert_all_ended()


async def test_a_mutated_call_gets_no_second_span(traces: Traces) -> None:
    """Replacing a stored call (``mutate_tool_call``) re-emits its event but adds no span."""
    redact = Middleware("redact")

    @redact.dispatch_output
    async def scrub(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            await ctx.mutate_tool_call(
                ToolCall.completed(id=call.id, tool=call.tool, args=call.args, results="[redacted]")
            )
        await call_next()

    runner = runner_for(
        Tracing(traces.provider), [step(propose("search", {"q": "x"}, "c1"))], middleware=[redact]
    )
    result = await runner.run("go")
    assert result.tool_calls[0].results == "[redacted]"
    assert len(traces.named("execute_tool search")) == 1


# -- concurrency --------------------------------------------------------------------------------


async def test_concurrent_turns_keep_separate_trees_and_leave_no_state(traces: Traces) -> None:
    """100 interleaved turns give 100 traces, each holding only its own turn's spans."""
    tracing = Tracing(traces.provider)
    runner = TurnRunner(
        executor=ToolLoopExecutor(
            ScriptedModel([step(propose("nap", {"seconds": 0}, "c1"))], cycle=True, record=False)
        ),
        tools=[nap],
        middleware=[tracing, watch_set()],
        max_iterations=2,
    )
    results = await asyncio.gather(*(runner.run(f"turn {i}") for i in range(100)))

    assert tracing._turns == {}
    assert "turns_in_flight=0" in repr(tracing)
    traces.assert_all_ended()
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in traces.spans():
        assert span.context is not None
        by_trace.setdefault(span.context.trace_id, []).append(span)
    assert len(by_trace) == 100
    turn_ids = set()
    for spans in by_trace.values():
        [turn] = [s for s in spans if s.name == "invoke_agent"]
        turn_id = attrs(turn)["loopware.turn.id"]
        turn_ids.add(turn_id)
        assert {attrs(s)["loopware.turn.id"] for s in spans} == {turn_id}
        assert len(spans) == len(traces.spans()) // 100
    assert turn_ids == {r.turn_id for r in results}


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"tracer_provider": object()}, "tracer_provider"),
        ({"capture_payloads": "yes"}, "capture_payloads"),
    ],
    ids=["not-a-provider", "non-bool-capture"],
)
def test_bad_options_raise_at_construction(kwargs: dict[str, Any], option: str) -> None:
    """Bad options raise `InvalidMiddlewareConfigError` naming the option."""
    with pytest.raises(InvalidMiddlewareConfigError) as caught:
        Tracing(**kwargs)
    assert caught.value.code == "E_INVALID_MIDDLEWARE_CONFIG"
    assert caught.value.option == option  # a context attribute


def test_missing_opentelemetry_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OpenTelemetry, `Tracing()` says which extra to install."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'loopware\[otel\]'") as e:
        Tracing()
    assert e.value.extra == "otel"  # a context attribute
    assert isinstance(e.value.__cause__, ImportError)


def test_importing_middleware_never_imports_opentelemetry() -> None:
    """``import middleware`` works, and loads no OpenTelemetry, when it is not installed."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import middleware\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry.')]\n"
        "from pipeline.errors import MissingExtraError\n"
        "try:\n"
        "    middleware.Tracing()\n"
        "except MissingExtraError as exc:\n"
        "    print(exc.code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "E_MISSING_EXTRA"


def test_repr_shows_the_options_and_turns_in_flight(traces: Traces) -> None:
    """The repr names the provider, the payload option and how many turns are open."""
    assert repr(Tracing(capture_payloads=True)) == (
        "Tracing(tracer_provider=global, capture_payloads=True, turns_in_flight=0)"
    )
    assert repr(Tracing(traces.provider)).startswith(
        f"Tracing(tracer_provider={traces.provider!r}, capture_payloads=False"
    )
