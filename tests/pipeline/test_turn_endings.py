"""Every way a turn ends (docs/architecture.md, "One turn"); TurnEnd once for each."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from middleware import Middleware
from pipeline import (
    DispatchContext,
    ToolLoopExecutor,
    ToolRegistry,
    TurnContext,
    TurnResult,
    TurnRunner,
    tool,
)
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.errors import (
    AlreadySignalledError,
    DispatchPipelineError,
    ExecutorError,
    InputPipelineError,
    IterationLimitError,
    NackedError,
    OutputPipelineError,
    PipelineShortCircuitedError,
    PolicyViolationError,
    StoreError,
)
from pipeline.events import DispatchEnd, DispatchStart, ErrorReported, Event, TurnEnd, TurnStart
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def propose(
    name: str, args: dict[str, Any] | None = None, *, call_id: str = "c1"
) -> ProposedToolCall:
    """A proposed call with JSON-encoded arguments."""
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(args or {}))


ECHO_THEN_ANSWER: tuple[ModelResponse, ...] = (
    ModelResponse(tool_calls=[propose("echo", {"text": "hi"})]),
    ModelResponse(text="all done"),
)


@dataclass
class Outcome:
    """What a scenario produced."""

    result: TurnResult | None
    events: list[Event]
    trace: list[str]
    store: MemoryStore
    abort_latency: float | None = None
    cancelled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def of(self, kind: type[Event]) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def done(self) -> TurnResult:
        assert self.result is not None
        return self.result


Executor = Callable[[DispatchContext], Awaitable[None]]
StageFn = Callable[[Any, CallNext], Awaitable[None]]


def build(
    trace: list[str],
    *,
    steps: Sequence[ModelResponse] = ECHO_THEN_ANSWER,
    executor: Executor | None = None,
    tools: Sequence[Any] = (echo,),
    **options: Any,
) -> tuple[TurnRunner, list[Event], MemoryStore]:
    """A runner whose executor records each iteration it runs in ``trace``."""
    inner: Executor = executor if executor is not None else ToolLoopExecutor(ScriptedModel(steps))

    async def traced(ctx: DispatchContext) -> None:
        trace.append(f"executor:{ctx.iteration}")
        await inner(ctx)

    store = MemoryStore()
    runner = TurnRunner(executor=traced, tools=tools, store=store, **options)
    events: list[Event] = []
    runner.on_any(events.append)
    return runner, events, store


async def run(trace: list[str], **options: Any) -> Outcome:
    runner, events, store = build(trace, **options)
    result = await runner.run("go", conversation_id="conv")
    return Outcome(result, events, trace, store)


def raising(trace: list[str], label: str, exc: Exception) -> StageFn:
    async def mw(ctx: Any, call_next: CallNext) -> None:
        trace.append(label)
        raise exc

    return mw


def returning(trace: list[str], label: str, signal: str | None = None) -> StageFn:
    """A middleware that returns without calling next, optionally after ack/nack."""

    async def mw(ctx: Any, call_next: CallNext) -> None:
        trace.append(label)
        if signal == "ack":
            ctx.ack()
        elif signal == "nack":
            ctx.nack()
        elif signal == "nack_error":
            ctx.nack(PolicyViolationError("blocked by policy", policy="test"))

    return mw


# -- scenarios -------------------------------------------------------------------------------------


async def happy() -> Outcome:
    return await run([])


async def turn_input_raises() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.turn_input(raising(trace, "turn_input", ValueError("bad input")))
    return await run(trace, middleware=[plain])


async def turn_input_short_circuits() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.turn_input(returning(trace, "turn_input"))
    return await run(trace, middleware=[plain])


async def turn_input_aborts() -> Outcome:
    trace: list[str] = []

    async def aborting(ctx: TurnContext, call_next: CallNext) -> None:
        trace.append("turn_input")
        ctx.abort("not today")
        await call_next()

    plain = Middleware("plain")
    plain.turn_input(aborting)
    return await run(trace, middleware=[plain])


async def executor_raises() -> Outcome:
    async def broken(ctx: DispatchContext) -> None:
        raise RuntimeError("model exploded")

    return await run([], executor=broken)


async def executor_nacks() -> Outcome:
    async def nacking(ctx: DispatchContext) -> None:
        ctx.nack()

    return await run([], executor=nacking)


async def executor_nacks_with_error() -> Outcome:
    async def nacking(ctx: DispatchContext) -> None:
        ctx.nack(PolicyViolationError("no more", policy="budget"))

    return await run([], executor=nacking)


async def executor_acks_twice() -> Outcome:
    async def twice(ctx: DispatchContext) -> None:
        await ctx.store_message(Message(role="assistant", content="hello"))
        ctx.ack()
        ctx.ack()

    return await run([], executor=twice)


async def dispatch_input_raises() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_input(raising(trace, "din", RuntimeError("din broke")))
    return await run(trace, middleware=[plain])


async def dispatch_input_short_circuits() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_input(returning(trace, "din"))
    return await run(trace, middleware=[plain])


async def dispatch_input_short_circuits_after_ack() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_input(returning(trace, "din", "ack"))
    return await run(trace, middleware=[plain])


async def dispatch_input_short_circuits_after_nack() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_input(returning(trace, "din", "nack"))
    return await run(trace, middleware=[plain])


async def dispatch_input_short_circuits_after_nack_with_error() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_input(returning(trace, "din", "nack_error"))
    return await run(trace, middleware=[plain])


async def dispatch_output_raises() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_output(raising(trace, "dout", RuntimeError("dout broke")))
    return await run(trace, middleware=[plain])


async def dispatch_output_short_circuits() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_output(returning(trace, "dout"))
    return await run(trace, middleware=[plain])


async def dispatch_output_short_circuits_after_ack() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_output(returning(trace, "dout", "ack"))
    return await run(trace, middleware=[plain])


async def dispatch_output_short_circuits_after_nack() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.dispatch_output(returning(trace, "dout", "nack"))
    return await run(trace, middleware=[plain])


async def dispatch_output_raises_after_ack() -> Outcome:
    trace: list[str] = []

    async def ack_then_raise(ctx: DispatchContext, call_next: CallNext) -> None:
        trace.append("dout")
        ctx.ack()
        raise RuntimeError("dout broke after ack")

    plain = Middleware("plain")
    plain.dispatch_output(ack_then_raise)
    return await run(trace, middleware=[plain])


class UnforgeableArtifact(SpooledArtifact):
    """An artifact class whose query tools cannot be forged (a bug in user code)."""

    @classmethod
    def forge_tools(cls, ctx: Any) -> ToolRegistry:
        raise RuntimeError("forging broke")


@tool(artifact_constructor=lambda: UnforgeableArtifact)
def dump() -> str:
    """Return a long text, shown to the model as an artifact handle."""
    return "line\n" * 2000


async def artifact_forging_raises() -> Outcome:
    steps = [ModelResponse(tool_calls=[propose("dump")]), ModelResponse(text="all done")]
    return await run([], steps=steps, tools=[dump])


async def turn_output_raises() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.turn_output(raising(trace, "tout", KeyError("missing")))
    return await run(trace, middleware=[plain])


async def turn_output_short_circuits() -> Outcome:
    trace: list[str] = []
    plain = Middleware("plain")
    plain.turn_output(returning(trace, "tout"))
    return await run(trace, middleware=[plain])


async def iteration_limit() -> Outcome:
    trace: list[str] = []
    model = ScriptedModel(
        [ModelResponse(tool_calls=[propose("echo", {"text": "again"})])], cycle=True
    )
    return await run(trace, executor=ToolLoopExecutor(model), max_iterations=3)


def nap_tool(started: asyncio.Event, cancelled: list[str]) -> Any:
    @tool
    async def nap(seconds: float, label: str) -> str:
        """Sleep a while, then return the label."""
        started.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.append(label)
            raise
        return label

    return nap


SLOW = 2.0


async def abort_inside() -> Outcome:
    """A tool running next to a slow one (parallel calls) aborts the turn."""
    started = asyncio.Event()
    cancelled: list[str] = []
    aborted_at: list[float] = []

    @tool
    async def stopper(ctx: DispatchContext) -> str:
        """Abort the turn once the nap is under way."""
        await started.wait()
        aborted_at.append(time.perf_counter())
        ctx.abort("stopped by a tool")
        return "stopped"

    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    propose("nap", {"seconds": SLOW, "label": "slow"}, call_id="n1"),
                    propose("stopper", call_id="s1"),
                ]
            )
        ]
    )
    trace: list[str] = []
    runner, events, store = build(
        trace,
        executor=ToolLoopExecutor(model, parallel_tool_calls=True),
        tools=[nap_tool(started, cancelled), stopper],
    )
    result = await runner.run("go")
    latency = time.perf_counter() - aborted_at[0]
    return Outcome(
        result, events, trace, store, abort_latency=latency, extra={"cancelled": cancelled}
    )


async def abort_outside() -> Outcome:
    """`TurnHandle.abort` while a tool sleeps."""
    started = asyncio.Event()
    cancelled: list[str] = []
    model = ScriptedModel(
        [ModelResponse(tool_calls=[propose("nap", {"seconds": SLOW, "label": "slow"})])]
    )
    trace: list[str] = []
    runner, events, store = build(
        trace, executor=ToolLoopExecutor(model), tools=[nap_tool(started, cancelled)]
    )
    handle = runner.start("go")
    await asyncio.wait_for(started.wait(), 1.0)
    t0 = time.perf_counter()
    handle.abort("user pressed stop")
    result = await handle
    latency = time.perf_counter() - t0
    return Outcome(
        result, events, trace, store, abort_latency=latency, extra={"cancelled": cancelled}
    )


async def caller_cancels() -> Outcome:
    """The caller cancels the task awaiting `run()` while a tool sleeps."""
    started = asyncio.Event()
    cancelled: list[str] = []
    model = ScriptedModel(
        [ModelResponse(tool_calls=[propose("nap", {"seconds": SLOW, "label": "slow"})])]
    )
    trace: list[str] = []
    runner, events, store = build(
        trace, executor=ToolLoopExecutor(model), tools=[nap_tool(started, cancelled)]
    )
    task = asyncio.create_task(runner.run("go"))
    await asyncio.wait_for(started.wait(), 1.0)
    t0 = time.perf_counter()
    task.cancel()
    was_cancelled = False
    try:
        await task
    except asyncio.CancelledError:
        was_cancelled = True
    latency = time.perf_counter() - t0
    return Outcome(
        None,
        events,
        trace,
        store,
        abort_latency=latency,
        cancelled=was_cancelled,
        extra={"cancelled": cancelled},
    )


SCENARIOS: dict[str, Callable[[], Awaitable[Outcome]]] = {
    fn.__name__: fn
    for fn in (
        happy,
        turn_input_raises,
        turn_input_short_circuits,
        turn_input_aborts,
        executor_raises,
        executor_nacks,
        executor_nacks_with_error,
        executor_acks_twice,
        dispatch_input_raises,
        dispatch_input_short_circuits,
        dispatch_input_short_circuits_after_ack,
        dispatch_input_short_circuits_after_nack,
        dispatch_input_short_circuits_after_nack_with_error,
        dispatch_output_raises,
        dispatch_output_short_circuits,
        dispatch_output_short_circuits_after_ack,
        dispatch_output_short_circuits_after_nack,
        dispatch_output_raises_after_ack,
        artifact_forging_raises,
        turn_output_raises,
        turn_output_short_circuits,
        iteration_limit,
        abort_inside,
        abort_outside,
        caller_cancels,
    )
}


# -- the rows --------------------------------------------------------------------------------------


async def test_happy_path_completes_with_the_final_answer() -> None:
    """A model that calls a tool and then answers ends the turn completed with its text."""
    out = await happy()
    result = out.done
    assert result.status == "completed"
    assert result.output == "all done"
    assert result.errors == ()
    assert result.iterations == 2
    assert [c.tool for c in result.tool_calls] == ["echo"]
    assert [m.role for m in result.messages] == ["user", "assistant", "assistant"]
    result.raise_for_status()


async def test_turn_input_raising_fails_the_turn_without_a_dispatch() -> None:
    """A raising turn input middleware gives InputPipelineError (cause kept) and no dispatch."""
    out = await turn_input_raises()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, InputPipelineError)
    assert error.code == "E_INPUT_PIPELINE_ERROR"
    assert isinstance(error.__cause__, ValueError)
    assert "bad input" in str(error)
    assert out.trace == ["turn_input"]
    assert out.of(DispatchStart) == []
    reported = out.of(ErrorReported)
    assert len(reported) == 1
    assert isinstance(reported[0], ErrorReported)
    assert reported[0].stage == "turn_input"
    assert reported[0].error is error


async def test_turn_input_short_circuit_fails_the_turn() -> None:
    """A turn input middleware that never calls next fails the turn with a short-circuit error."""
    out = await turn_input_short_circuits()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, PipelineShortCircuitedError)
    assert error.code == "E_PIPELINE_SHORT_CIRCUITED"
    assert error.stage == "turn_input"
    assert out.of(DispatchStart) == []
    assert out.trace == ["turn_input"]


async def test_turn_input_abort_ends_the_turn_aborted_without_a_dispatch() -> None:
    """Aborting in turn input ends the turn aborted, with no dispatch and no error."""
    out = await turn_input_aborts()
    result = out.done
    assert result.status == "aborted"
    assert result.abort_reason == "not today"
    assert result.errors == ()
    assert out.trace == ["turn_input"]
    assert out.of(DispatchStart) == []


async def test_executor_raising_fails_with_executor_error_carrying_the_cause_text() -> None:
    """An executor exception becomes ExecutorError whose message ends with the cause's text."""
    out = await executor_raises()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, ExecutorError)
    assert error.code == "E_LLM_EXECUTION_EXECUTOR_ERROR"
    assert error.message.endswith(": model exploded")
    assert isinstance(error.__cause__, RuntimeError)
    stages = [e.stage for e in out.of(ErrorReported) if isinstance(e, ErrorReported)]
    assert stages == ["executor"]
    end = out.of(DispatchEnd)[0]
    assert isinstance(end, DispatchEnd)
    assert end.status == "nack"
    assert end.error is error
    with pytest.raises(ExecutorError):
        result.raise_for_status()


async def test_executor_nack_without_error_fails_with_nacked_error() -> None:
    """A bare nack() fails the turn with NackedError."""
    out = await executor_nacks()
    result = out.done
    assert result.status == "failed"
    assert len(result.errors) == 1
    assert isinstance(result.errors[0], NackedError)
    assert result.errors[0].code == "E_NACKED"


async def test_executor_nack_with_error_fails_with_that_error() -> None:
    """nack(error) fails the turn with exactly that error."""
    out = await executor_nacks_with_error()
    result = out.done
    assert result.status == "failed"
    assert len(result.errors) == 1
    assert isinstance(result.errors[0], PolicyViolationError)
    assert result.errors[0].message == "no more"
    with pytest.raises(PolicyViolationError):
        result.raise_for_status()


async def test_executor_acking_twice_fails_with_already_signalled_as_cause() -> None:
    """A second ack() raises AlreadySignalledError, which fails the turn as an ExecutorError."""
    out = await executor_acks_twice()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, ExecutorError)
    assert isinstance(error.__cause__, AlreadySignalledError)
    assert error.__cause__.code == "E_LLM_EXECUTION_ALREADY_SIGNALLED"
    assert result.output is None


async def test_dispatch_input_raising_nacks_before_the_executor() -> None:
    """A raising dispatch input middleware nacks with DispatchPipelineError; no executor runs."""
    out = await dispatch_input_raises()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, DispatchPipelineError)
    assert error.code == "E_DISPATCH_PIPELINE_ERROR"
    assert error.stage == "dispatch_input"
    assert isinstance(error.__cause__, RuntimeError)
    assert out.trace == ["din"]
    end = out.of(DispatchEnd)[0]
    assert isinstance(end, DispatchEnd)
    assert (end.status, end.error) == ("nack", error)


async def test_dispatch_input_short_circuit_without_signal_fails() -> None:
    """Returning without call_next in dispatch input, unsignalled, is a short-circuit error."""
    out = await dispatch_input_short_circuits()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, PipelineShortCircuitedError)
    assert error.stage == "dispatch_input"
    assert out.trace == ["din"]


async def test_dispatch_input_short_circuit_after_ack_completes_without_the_executor() -> None:
    """Acking and returning in dispatch input is legal: the turn completes, executor skipped."""
    out = await dispatch_input_short_circuits_after_ack()
    result = out.done
    assert result.status == "completed"
    assert result.errors == ()
    assert result.iterations == 1
    assert out.trace == ["din"]


async def test_dispatch_input_short_circuit_after_nack_fails_with_nacked_error() -> None:
    """Nacking and returning in dispatch input fails the turn with NackedError, no executor."""
    out = await dispatch_input_short_circuits_after_nack()
    result = out.done
    assert result.status == "failed"
    assert [type(e) for e in result.errors] == [NackedError]
    assert out.trace == ["din"]


async def test_dispatch_input_short_circuit_after_nack_with_error_fails_with_it() -> None:
    """Nacking with an error and returning in dispatch input fails the turn with that error."""
    out = await dispatch_input_short_circuits_after_nack_with_error()
    result = out.done
    assert result.status == "failed"
    assert [type(e) for e in result.errors] == [PolicyViolationError]


async def test_dispatch_output_raising_fails_and_keeps_the_stored_calls() -> None:
    """A raising dispatch output middleware nacks; calls the executor stored stay stored."""
    out = await dispatch_output_raises()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, DispatchPipelineError)
    assert error.stage == "dispatch_output"
    assert out.trace == ["executor:0", "dout"]
    assert [c.tool for c in result.tool_calls] == ["echo"]
    _, stored = await out.store.load_conversation("conv")
    assert [c.id for c in stored] == [c.id for c in result.tool_calls]


async def test_dispatch_output_short_circuit_without_signal_fails() -> None:
    """Returning without call_next in dispatch output, unsignalled, is a short-circuit error."""
    out = await dispatch_output_short_circuits()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, PipelineShortCircuitedError)
    assert error.stage == "dispatch_output"


async def test_dispatch_output_short_circuit_after_ack_completes_the_turn() -> None:
    """Acking and returning in dispatch output completes the turn after that iteration."""
    out = await dispatch_output_short_circuits_after_ack()
    result = out.done
    assert result.status == "completed"
    assert result.iterations == 1
    assert out.trace == ["executor:0", "dout"]
    assert [c.tool for c in result.tool_calls] == ["echo"]


async def test_dispatch_output_short_circuit_after_nack_fails() -> None:
    """Nacking and returning in dispatch output fails the turn with NackedError."""
    out = await dispatch_output_short_circuits_after_nack()
    result = out.done
    assert result.status == "failed"
    assert [type(e) for e in result.errors] == [NackedError]
    assert result.iterations == 1


async def test_dispatch_output_raising_after_ack_fails_the_turn() -> None:
    """A dispatch middleware that raises after ``ack()`` still fails the dispatch (7.3)."""
    out = await dispatch_output_raises_after_ack()
    result = out.done
    assert result.status == "failed"
    assert [type(e) for e in result.errors] == [DispatchPipelineError]
    end = out.of(DispatchEnd)[0]
    assert isinstance(end, DispatchEnd)
    assert (end.status, end.error) == ("nack", result.errors[0])


async def test_artifact_forging_raising_fails_the_turn_with_a_turn_end() -> None:
    """A broken artifact class's forge_tools fails the turn cleanly instead of escaping run()."""
    out = await artifact_forging_raises()
    result = out.done
    assert result.status == "failed"
    (error,) = result.errors
    assert isinstance(error, ExecutorError)
    assert str(error).endswith(": forging broke")
    assert isinstance(error.__cause__, RuntimeError)
    assert [c.tool for c in result.tool_calls] == ["dump"]
    assert out.trace == ["executor:0"]


async def test_turn_output_raising_fails_after_the_dispatch_and_keeps_stored_calls() -> None:
    """A raising turn output middleware gives OutputPipelineError; stored calls are kept."""
    out = await turn_output_raises()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, OutputPipelineError)
    assert error.code == "E_OUTPUT_PIPELINE_ERROR"
    assert isinstance(error.__cause__, KeyError)
    assert result.output is None
    assert [c.tool for c in result.tool_calls] == ["echo"]
    _, stored = await out.store.load_conversation("conv")
    assert len(stored) == 1
    end = out.of(DispatchEnd)[0]
    assert isinstance(end, DispatchEnd)
    assert end.status == "ack"


async def test_turn_output_short_circuit_fails_the_turn() -> None:
    """A turn output middleware that never calls next fails the turn with a short-circuit error."""
    out = await turn_output_short_circuits()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, PipelineShortCircuitedError)
    assert error.stage == "turn_output"


async def test_iteration_limit_nacks_with_iteration_limit_error() -> None:
    """A model that never stops calling tools hits max_iterations and the turn fails."""
    out = await iteration_limit()
    result = out.done
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, IterationLimitError)
    assert error.code == "E_ITERATION_LIMIT"
    assert error.status == 429
    assert result.iterations == 3
    assert out.trace == ["executor:0", "executor:1", "executor:2"]
    assert len(result.tool_calls) == 3
    end = out.of(DispatchEnd)[0]
    assert isinstance(end, DispatchEnd)
    assert (end.status, end.iterations) == ("nack", 3)


async def test_abort_from_inside_during_a_slow_tool_ends_the_turn_promptly() -> None:
    """A parallel tool aborting the turn cancels the slow sibling; the turn ends within 100 ms."""
    out = await abort_inside()
    result = out.done
    assert result.status == "aborted"
    assert result.abort_reason == "stopped by a tool"
    assert result.errors == ()
    assert out.abort_latency is not None
    assert out.abort_latency < 0.1
    assert out.extra["cancelled"] == ["slow"]
    end = out.of(DispatchEnd)[0]
    assert isinstance(end, DispatchEnd)
    assert end.status == "aborted"
    with pytest.raises(Exception, match="aborted"):
        result.raise_for_status()


async def test_abort_from_outside_during_a_slow_tool_ends_the_turn_promptly() -> None:
    """TurnHandle.abort cancels the in-flight tool; the turn ends aborted within 100 ms."""
    out = await abort_outside()
    result = out.done
    assert result.status == "aborted"
    assert result.abort_reason == "user pressed stop"
    assert result.errors == ()
    assert out.abort_latency is not None
    assert out.abort_latency < 0.1
    assert out.extra["cancelled"] == ["slow"]


async def test_caller_cancellation_propagates_and_emits_an_aborted_turn_end() -> None:
    """Cancelling the caller's task re-raises CancelledError after a TurnEnd(status=aborted)."""
    out = await caller_cancels()
    assert out.cancelled
    assert out.abort_latency is not None
    assert out.abort_latency < 0.1
    ends = out.of(TurnEnd)
    assert len(ends) == 1
    assert isinstance(ends[0], TurnEnd)
    assert ends[0].status == "aborted"
    assert out.extra["cancelled"] == ["slow"]


async def test_abort_inside_skips_the_remaining_proposed_calls() -> None:
    """A tool that aborts the turn stops the executor before the next proposed call runs."""
    started = asyncio.Event()
    cancelled: list[str] = []

    @tool
    def stopper(ctx: DispatchContext) -> str:
        """Abort the turn."""
        ctx.abort("enough")
        return "stopped"

    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    propose("stopper", call_id="s1"),
                    propose("nap", {"seconds": SLOW, "label": "never"}, call_id="n1"),
                ]
            )
        ]
    )
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[stopper, nap_tool(started, cancelled)]
    )
    t0 = time.perf_counter()
    result = await runner.run("go")
    assert time.perf_counter() - t0 < 0.1
    assert result.status == "aborted"
    assert not started.is_set()
    # the skipped proposal is answered with an error record, so every announced id has one
    assert [(c.tool, c.is_error) for c in result.tool_calls] == [("stopper", False), ("nap", True)]
    assert len(model.requests) == 1


# -- TurnEnd exactly once ------------------------------------------------------------------------

EXPECTED_STATUS = {
    "happy": "completed",
    "dispatch_input_short_circuits_after_ack": "completed",
    "dispatch_output_short_circuits_after_ack": "completed",
    "turn_input_aborts": "aborted",
    "abort_inside": "aborted",
    "abort_outside": "aborted",
    "caller_cancels": "aborted",
}


@pytest.mark.parametrize("name", list(SCENARIOS), ids=list(SCENARIOS))
async def test_turn_end_is_emitted_exactly_once(name: str) -> None:
    """Whatever ends the turn, TurnStart and TurnEnd are each emitted once, TurnEnd last."""
    out = await SCENARIOS[name]()
    starts = out.of(TurnStart)
    ends = out.of(TurnEnd)
    assert len(starts) == 1
    assert len(ends) == 1
    end = ends[0]
    assert isinstance(end, TurnEnd)
    assert out.events.index(starts[0]) == 0
    assert out.events[-1] is end
    assert end.status == EXPECTED_STATUS.get(name, "failed")
    if out.result is not None:
        assert end.status == out.result.status
        assert end.turn_id == out.result.turn_id
    assert (end.error is None) == (end.status != "failed")
    dispatch_starts = out.of(DispatchStart)
    dispatch_ends = out.of(DispatchEnd)
    assert len(dispatch_starts) == len(dispatch_ends) <= 1
    if dispatch_ends:
        assert out.events.index(dispatch_starts[0]) < out.events.index(dispatch_ends[0])
        assert out.events.index(dispatch_ends[0]) < out.events.index(end)


class FailingMessageStore(MemoryStore):
    """A store whose message writes fail (a full disk, a lost connection)."""

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        raise OSError("disk full")


class FailingLoadStore(MemoryStore):
    """A store that cannot load a conversation."""

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        raise OSError("connection lost")


async def test_store_failure_on_the_user_message_fails_the_turn_with_a_turn_end() -> None:
    """A store that cannot save the input ends the turn failed with StoreError, not a crash."""
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), store=FailingMessageStore())
    events: list[Event] = []
    runner.on_any(events.append)
    result = await runner.run("go", conversation_id="conv")
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, StoreError)
    assert error.code == "E_STORE_ERROR"
    assert isinstance(error.__cause__, OSError)
    assert [type(e) for e in events if isinstance(e, (TurnStart, TurnEnd))] == [TurnStart, TurnEnd]
    assert not any(isinstance(e, DispatchStart) for e in events)


async def test_store_failure_loading_the_conversation_fails_the_turn() -> None:
    """A store that cannot load the conversation ends the turn failed with StoreError."""
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), store=FailingLoadStore())
    result = await runner.run("go", conversation_id="conv")
    assert result.status == "failed"
    assert isinstance(result.errors[0], StoreError)
    assert isinstance(result.errors[0].__cause__, OSError)


async def test_store_failure_loading_the_conversation_still_pairs_turn_start_and_end() -> None:
    """Even when loading history fails, listeners see TurnStart before TurnEnd."""
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), store=FailingLoadStore())
    events: list[Event] = []
    runner.on_any(events.append)
    await runner.run("go", conversation_id="conv")
    assert [type(e) for e in events if isinstance(e, (TurnStart, TurnEnd))] == [TurnStart, TurnEnd]
