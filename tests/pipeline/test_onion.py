"""Onion composition of middleware: order, errors, freshness, signals."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from middleware import Middleware
from pipeline import DispatchContext, Tool, ToolLoopExecutor, TurnRunner, tool
from pipeline.errors import DispatchPipelineError, NextCalledTwiceError, PolicyViolationError
from pipeline.events import Event, IterationEnd
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel

StageFn = Callable[[Any, CallNext], Any]
STAGES = ("turn_input", "dispatch_input", "dispatch_output", "turn_output")


def staged(executor: Any, stacks: Mapping[str, Sequence[StageFn]], **options: Any) -> TurnRunner:
    """A runner with plain middleware stacks given per stage name, placed in one set."""
    plain = Middleware("plain")
    for stage, fns in stacks.items():
        for index, fn in enumerate(fns):
            getattr(plain, stage)(name=f"{stage}.{index}")(fn)
    return TurnRunner(executor=executor, middleware=[plain], **options)


def echo_call(i: int) -> ModelResponse:
    args = json.dumps({"text": str(i)})
    return ModelResponse(tool_calls=[ProposedToolCall(id=f"c{i}", name="echo", arguments=args)])


def recording(log: list[str], label: str) -> StageFn:
    """Middleware that logs ``enter``/``exit`` around call_next."""

    async def mw(ctx: Any, call_next: CallNext) -> None:
        log.append(f"enter {label}")
        await call_next()
        log.append(f"exit {label}")

    mw.__qualname__ = label
    return mw


async def test_outer_middleware_sees_the_inner_exception() -> None:
    """An exception raised by an inner middleware propagates through the outer's call_next."""
    seen: list[BaseException] = []
    original = ValueError("inner failed")

    async def outer(ctx: DispatchContext, call_next: CallNext) -> None:
        try:
            await call_next()
        except ValueError as exc:
            seen.append(exc)
            raise

    async def inner(ctx: DispatchContext, call_next: CallNext) -> None:
        raise original

    runner = staged(ToolLoopExecutor(ScriptedModel([])), {"dispatch_input": [outer, inner]})
    result = await runner.run("hi")
    assert seen == [original]
    error = result.errors[0]
    assert isinstance(error, DispatchPipelineError)
    assert error.__cause__ is original


async def test_outer_middleware_can_handle_the_inner_exception() -> None:
    """An outer middleware may catch an inner exception and nack with its own error instead."""

    async def outer(ctx: DispatchContext, call_next: CallNext) -> None:
        try:
            await call_next()
        except RuntimeError as exc:
            ctx.nack(PolicyViolationError(f"handled: {exc}", policy="outer"))

    async def inner(ctx: DispatchContext, call_next: CallNext) -> None:
        raise RuntimeError("inner broke")

    runner = staged(ToolLoopExecutor(ScriptedModel([])), {"dispatch_input": [outer, inner]})
    result = await runner.run("hi")
    assert result.status == "failed"
    assert len(result.errors) == 1
    assert isinstance(result.errors[0], PolicyViolationError)
    assert result.errors[0].message == "handled: inner broke"


async def test_post_steps_run_in_reverse_order() -> None:
    """Code after call_next runs innermost first, in every stage."""
    log: list[str] = []
    stages: dict[str, list[StageFn]] = {
        stage: [recording(log, f"{stage}.{n}") for n in ("a", "b", "c")] for stage in STAGES
    }
    model = ScriptedModel([echo_call(0), ModelResponse(text="done")])
    runner = staged(ToolLoopExecutor(model), stages)
    await runner.run("hi")
    for stage in STAGES:
        mine = [line for line in log if f" {stage}." in line][:6]
        assert mine == [
            f"enter {stage}.a",
            f"enter {stage}.b",
            f"enter {stage}.c",
            f"exit {stage}.c",
            f"exit {stage}.b",
            f"exit {stage}.a",
        ]


async def test_middleware_runs_on_every_iteration_of_a_twenty_iteration_dispatch(
    echo_tool: Tool[BaseModel],
) -> None:
    """Dispatch middleware run on all 20 iterations (output skips only the acking one)."""
    seen_in: list[int] = []
    seen_out: list[int] = []

    async def din(ctx: DispatchContext, call_next: CallNext) -> None:
        seen_in.append(ctx.iteration)
        await call_next()

    async def dout(ctx: DispatchContext, call_next: CallNext) -> None:
        seen_out.append(ctx.iteration)
        assert [c.tool for c in ctx.new_tool_calls] == ["echo"]
        await call_next()

    model = ScriptedModel([*(echo_call(i) for i in range(19)), ModelResponse(text="done")])
    runner = staged(
        ToolLoopExecutor(model),
        {"dispatch_input": [din], "dispatch_output": [dout]},
        tools=[echo_tool],
    )
    result = await runner.run("hi")
    assert result.status == "completed"
    assert result.iterations == 20
    assert seen_in == list(range(20))
    assert seen_out == list(range(19))


async def test_middleware_runs_on_every_one_of_three_sequential_turns(
    echo_tool: Tool[BaseModel],
) -> None:
    """A reused runner runs every stage's middleware on each turn (the ADK reuse bug)."""
    counts: dict[str, int] = dict.fromkeys(STAGES, 0)

    def counting(stage: str) -> StageFn:
        async def mw(ctx: Any, call_next: CallNext) -> None:
            counts[stage] += 1
            await call_next()

        return mw

    model = ScriptedModel([echo_call(0), ModelResponse(text="done")], cycle=True)
    runner = staged(
        ToolLoopExecutor(model),
        {stage: [counting(stage)] for stage in STAGES},
        tools=[echo_tool],
    )
    for n in range(1, 4):
        result = await runner.run(f"turn {n}")
        assert result.status == "completed"
        assert counts == {
            "turn_input": n,
            "dispatch_input": 2 * n,
            "dispatch_output": n,
            "turn_output": n,
        }


async def test_awaiting_call_next_twice_raises_next_called_twice() -> None:
    """A middleware awaiting call_next() twice fails the turn with NextCalledTwiceError."""
    inner_runs: list[int] = []

    async def greedy(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()
        await call_next()

    async def inner(ctx: DispatchContext, call_next: CallNext) -> None:
        inner_runs.append(ctx.iteration)
        await call_next()

    runner = staged(ToolLoopExecutor(ScriptedModel([])), {"dispatch_input": [greedy, inner]})
    result = await runner.run("hi")
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, NextCalledTwiceError)
    assert error.code == "E_NEXT_CALLED_TWICE"
    assert error.fatal
    assert inner_runs == [0]


async def test_next_called_twice_in_a_turn_stage_fails_the_turn() -> None:
    """NextCalledTwiceError in turn input stops the turn before the dispatch."""
    executed: list[int] = []

    async def greedy(ctx: Any, call_next: CallNext) -> None:
        await call_next()
        await call_next()

    async def executor(ctx: DispatchContext) -> None:
        executed.append(ctx.iteration)
        ctx.ack()

    runner = staged(executor, {"turn_input": [greedy]})
    result = await runner.run("hi")
    assert result.status == "failed"
    assert isinstance(result.errors[0], NextCalledTwiceError)
    assert executed == []


async def test_abort_skips_middleware_that_have_not_started() -> None:
    """After abort(), inner middleware never start but started ones finish their post-steps."""
    log: list[str] = []
    executed: list[int] = []

    async def aborting(ctx: DispatchContext, call_next: CallNext) -> None:
        log.append("enter aborting")
        ctx.abort("halt")
        await call_next()
        log.append("exit aborting")

    async def executor(ctx: DispatchContext) -> None:
        executed.append(ctx.iteration)
        ctx.ack()

    runner = staged(
        executor,
        {
            "dispatch_input": [recording(log, "outer"), aborting, recording(log, "inner")],
            "dispatch_output": [recording(log, "output")],
            "turn_output": [recording(log, "turn_output")],
        },
    )
    result = await runner.run("hi")
    assert result.status == "aborted"
    assert result.abort_reason == "halt"
    assert log == ["enter outer", "enter aborting", "exit aborting", "exit outer"]
    assert executed == []


async def test_ack_in_dispatch_input_skips_the_executor_but_not_the_rest_of_the_stage() -> None:
    """Acking in dispatch input skips the executor and output; later input middleware still run."""
    log: list[str] = []
    executed: list[int] = []

    async def acking(ctx: DispatchContext, call_next: CallNext) -> None:
        ctx.ack()
        await call_next()

    async def later(ctx: DispatchContext, call_next: CallNext) -> None:
        log.append(f"later saw acked={ctx.is_acked}")
        await call_next()

    async def executor(ctx: DispatchContext) -> None:
        executed.append(ctx.iteration)

    runner = staged(
        executor,
        {"dispatch_input": [acking, later], "dispatch_output": [recording(log, "output")]},
    )
    result = await runner.run("hi")
    assert result.status == "completed"
    assert result.iterations == 1
    assert log == ["later saw acked=True"]
    assert executed == []


async def test_ack_in_the_executor_skips_that_iterations_output_pipeline(
    echo_tool: Tool[BaseModel],
) -> None:
    """Output middleware run after a tool-calling iteration but not after the acking one."""
    log: list[str] = []

    async def din(ctx: DispatchContext, call_next: CallNext) -> None:
        log.append(f"input {ctx.iteration}")
        await call_next()

    async def dout(ctx: DispatchContext, call_next: CallNext) -> None:
        log.append(f"output {ctx.iteration}")
        await call_next()

    model = ScriptedModel([echo_call(0), ModelResponse(text="done")])
    runner = staged(
        ToolLoopExecutor(model),
        {"dispatch_input": [din], "dispatch_output": [dout]},
        tools=[echo_tool],
    )
    result = await runner.run("hi")
    assert result.status == "completed"
    assert log == ["input 0", "output 0", "input 1"]


async def test_ack_in_output_completes_the_iteration(
    echo_tool: Tool[BaseModel], record: Callable[[TurnRunner], list[Event]]
) -> None:
    """Acking in dispatch output lets the stage finish, ends the iteration and the dispatch."""
    log: list[str] = []

    async def acking(ctx: DispatchContext, call_next: CallNext) -> None:
        ctx.ack()
        await call_next()
        log.append("acking exit")

    async def inner(ctx: DispatchContext, call_next: CallNext) -> None:
        log.append(f"inner saw acked={ctx.is_acked}")
        await call_next()

    model = ScriptedModel([echo_call(0), echo_call(1), ModelResponse(text="done")])
    runner = staged(
        ToolLoopExecutor(model), {"dispatch_output": [acking, inner]}, tools=[echo_tool]
    )
    events = record(runner)
    result = await runner.run("hi")
    assert result.status == "completed"
    assert result.iterations == 1
    assert log == ["inner saw acked=True", "acking exit"]
    assert len(model.requests) == 1
    assert [e.iteration for e in events if isinstance(e, IterationEnd)] == [0]


async def test_turn_stage_context_is_the_turn_and_dispatch_stage_context_is_the_dispatch() -> None:
    """Turn stages receive the TurnContext; dispatch stages receive its DispatchContext."""
    seen: dict[str, Any] = {}

    def grab(stage: str) -> StageFn:
        async def mw(ctx: Any, call_next: CallNext) -> None:
            seen[stage] = ctx
            await call_next()

        return mw

    async def executor(ctx: DispatchContext) -> None:
        await ctx.store_message(Message(role="assistant", content="ok"))
        ctx.ack()

    runner = staged(
        executor,
        {
            "dispatch_input": [grab("dispatch_input")],
            "turn_input": [grab("turn_input")],
            "turn_output": [grab("turn_output")],
        },
    )
    await runner.run("hi")
    assert seen["turn_input"] is seen["turn_output"]
    assert isinstance(seen["dispatch_input"], DispatchContext)
    assert seen["dispatch_input"].turn is seen["turn_input"]
    assert seen["dispatch_input"].stash is seen["turn_input"].stash
    assert seen["dispatch_input"].tools is seen["turn_input"].tools


# -- property: onion ordering ------------------------------------------------------------------


def expected_log(n: int, fail_at: int | None) -> list[str]:
    depth = n if fail_at is None else fail_at + 1
    entered = [f"enter {i}" for i in range(depth)]
    if fail_at is None:
        return [*entered, *(f"exit {i}" for i in reversed(range(n)))]
    return [*entered, *(f"unwind {i}" for i in reversed(range(fail_at)))]


def layers(log: list[str], n: int, fail_at: int | None) -> list[StageFn]:
    def layer(i: int) -> StageFn:
        async def mw(ctx: Any, call_next: CallNext) -> None:
            if getattr(ctx, "iteration", 0) != 0:
                await call_next()
                return
            log.append(f"enter {i}")
            if i == fail_at:
                raise RuntimeError(f"layer {i}")
            try:
                await call_next()
            except RuntimeError:
                log.append(f"unwind {i}")
                raise
            log.append(f"exit {i}")

        return mw

    return [layer(i) for i in range(n)]


async def ack_on_second_iteration(ctx: DispatchContext) -> None:
    """An executor that lets iteration 0 reach the output stage, then acks."""
    if ctx.iteration == 1:
        await ctx.store_message(Message(role="assistant", content="done"))
        ctx.ack()


@settings(max_examples=60, deadline=None)
@given(
    stage=st.sampled_from(STAGES),
    n=st.integers(min_value=1, max_value=8),
    fail=st.data(),
)
def test_onion_order_property(stage: str, n: int, fail: st.DataObject) -> None:
    """Random stacks: enter order is list order, exit order is reversed, errors unwind outward."""
    fail_at: int | None = fail.draw(st.none() | st.integers(min_value=0, max_value=n - 1))
    log: list[str] = []
    stack: Sequence[StageFn] = layers(log, n, fail_at)
    runner = staged(ack_on_second_iteration, {stage: stack})
    names = runner.describe_pipelines()[stage]
    assert len(names) == n
    result = runner.run_sync("go")
    assert log == expected_log(n, fail_at)
    assert result.status == ("completed" if fail_at is None else "failed")


async def test_hooks_run_in_line_between_the_layers_around_them() -> None:
    """One-argument hooks (checks) run in order between real layers, without layers of their
    own: a dispatch stage and the tool_call stage see hooks and layers in registration order,
    sync and async hooks alike."""
    log: list[str] = []
    stack = Middleware("stack")

    @stack.tool_call
    def first(ctx: Any) -> None:
        log.append("check first")

    @stack.tool_call
    async def around(ctx: Any, call_next: CallNext) -> None:
        log.append("enter around")
        await call_next()
        log.append("exit around")

    @stack.tool_call
    async def last(ctx: Any) -> None:
        log.append("check last")

    @stack.dispatch_output
    def seen(ctx: DispatchContext) -> None:
        log.append(f"output {len(ctx.new_tool_calls)}")

    @stack.dispatch_output
    async def ends(ctx: DispatchContext) -> None:
        log.append("output end")

    specs = stack.middleware_specs()
    assert [spec.check is not None for spec in specs] == [True, False, True, True, True]

    @tool(name="echo")
    def echo(text: str) -> str:
        """Echo."""
        log.append("handler")
        return text

    model = ScriptedModel([echo_call(0), ModelResponse(text="done")])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo], middleware=[stack])
    result = await runner.run("go")
    assert result.status == "completed"
    assert log[:7] == [
        "check first",
        "enter around",
        "check last",
        "handler",
        "exit around",
        "output 1",
        "output end",
    ]


async def test_a_hook_that_denies_keeps_the_inner_layers_and_handler_from_running() -> None:
    """A check that denies the call ends its way in: later checks, layers and the handler do
    not run, and the record names the check's decision."""
    log: list[str] = []
    stack = Middleware("stack")

    @stack.tool_call
    def refuse(ctx: Any) -> None:
        ctx.deny("not today")

    @stack.tool_call
    def later(ctx: Any) -> None:
        log.append("later")

    @tool(name="echo")
    def echo(text: str) -> str:
        """Echo."""
        log.append("handler")
        return text

    model = ScriptedModel([echo_call(0), ModelResponse(text="done")])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo], middleware=[stack])
    result = await runner.run("go")
    (call,) = result.tool_calls
    assert log == []
    assert not call.ran
    assert [d.policy for d in call.decisions] == ["stack.refuse"]


async def test_a_hook_that_raises_fails_the_call_under_its_own_name() -> None:
    """A check that raises fails its call as a tool_call stage error naming that check."""
    stack = Middleware("stack")

    @stack.tool_call
    async def around(ctx: Any, call_next: CallNext) -> None:
        await call_next()

    @stack.tool_call
    def broken(ctx: Any) -> None:
        raise RuntimeError("boom")

    @tool(name="echo")
    def echo(text: str) -> str:
        """Echo."""
        return text

    model = ScriptedModel([echo_call(0), ModelResponse(text="done")])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo], middleware=[stack])
    result = await runner.run("go")
    (call,) = result.tool_calls
    assert not call.ran
    assert [(d.policy, d.action) for d in call.decisions] == [("stack.broken", "failed")]
