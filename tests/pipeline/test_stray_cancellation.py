"""A CancelledError nobody asked for is a failure of its raiser, not a cancelled turn."""

from __future__ import annotations

import asyncio

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.errors import DispatchPipelineError, ExecutorError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel


async def _await_a_cancelled_future() -> None:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


async def test_executor_awaiting_a_cancelled_future_fails_the_turn() -> None:
    """The turn fails with ExecutorError; `run()` returns instead of raising CancelledError."""

    async def executor(ctx: DispatchContext) -> None:
        await _await_a_cancelled_future()

    result = await TurnRunner(executor=executor).run("go")
    assert result.status == "failed"
    assert isinstance(result.errors[0], ExecutorError)
    assert "CancelledError" in result.errors[0].message


async def test_middleware_awaiting_a_cancelled_future_fails_the_dispatch() -> None:
    """A dispatch middleware hitting a stray CancelledError nacks with DispatchPipelineError."""

    async def flaky(ctx: DispatchContext, call_next: CallNext) -> None:
        await _await_a_cancelled_future()

    plain = Middleware("plain")
    plain.dispatch_input(flaky)
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), middleware=[plain])
    result = await runner.run("go")
    assert result.status == "failed"
    assert isinstance(result.errors[0], DispatchPipelineError)


async def test_a_real_caller_cancellation_still_propagates() -> None:
    """Cancelling the task that awaits `run()` still raises CancelledError out of it."""

    @tool
    async def slow() -> str:
        """Sleep."""
        await asyncio.sleep(10)
        return "late"

    steps = [ModelResponse(tool_calls=[ProposedToolCall(id="s", name="slow", arguments="{}")])]
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[slow])
    task = asyncio.ensure_future(runner.run("go"))
    await asyncio.sleep(0.01)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:  # pragma: no cover - the assertion below reports it
        raise AssertionError("run() swallowed the caller's cancellation")
    assert task.cancelled()


async def test_an_inside_abort_answers_every_announced_call_id() -> None:
    """Calls proposed after an inside abort are stored as errors, so every id has a record."""

    @tool
    def stop(ctx: DispatchContext) -> str:
        """Abort the turn."""
        ctx.abort("enough")
        return "stopping"

    @tool
    def never() -> str:
        """Must not run."""
        raise AssertionError("ran after the abort")

    calls = [
        ProposedToolCall(id="a", name="stop", arguments="{}"),
        ProposedToolCall(id="b", name="never", arguments="{}"),
    ]
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([ModelResponse(tool_calls=calls)])),
        tools=[stop, never],
    )
    result = await runner.run("go")
    assert result.status == "aborted"
    assert [c.id for c in result.tool_calls] == ["a", "b"]
    assert result.tool_calls[1].is_error
    assert "aborted" in str(result.tool_calls[1].results)
