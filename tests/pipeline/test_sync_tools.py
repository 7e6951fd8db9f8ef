"""Sync tool handlers run in worker threads (bounded per runner); async ones stay on the loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from pipeline import DispatchContext, ToolThreads, TurnRunner, tool
from pipeline.errors import InvalidRunnerConfigError
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall

REQUEST = contextvars.ContextVar("REQUEST", default="none")


class CallOnce:
    """Asks for one call of ``name`` per turn, then answers with the call's result."""

    def __init__(self, name: str, arguments: str = "{}") -> None:
        self.name = name
        self.arguments = arguments

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not request.tool_calls:
            call = ProposedToolCall(id="c1", name=self.name, arguments=self.arguments)
            return ModelResponse(tool_calls=[call])
        return ModelResponse(text=str(request.tool_calls[-1].results))


@tool
def block(seconds: float) -> str:
    """Sleep like a blocking client call."""
    time.sleep(seconds)
    return "slept"


@tool
def where() -> str:
    """Name the thread the handler runs in and the context variable it sees."""
    return f"{threading.get_ident()} {REQUEST.get()}"


@tool
async def where_async() -> str:
    """Name the thread an async handler runs in."""
    return str(threading.get_ident())


async def test_four_concurrent_turns_with_a_one_second_sync_tool_finish_in_under_1_5_s() -> None:
    runner = TurnRunner(model=CallOnce("block", '{"seconds": 1.0}'), tools=[block])
    started = time.perf_counter()
    results = await asyncio.gather(*(runner.run("go") for _ in range(4)))
    elapsed = time.perf_counter() - started
    assert [r.output for r in results] == ["slept"] * 4
    assert elapsed < 1.5, elapsed


async def test_tool_threads_bounds_how_many_sync_handlers_run_at_once() -> None:
    runner = TurnRunner(model=CallOnce("block", '{"seconds": 0.3}'), tools=[block], tool_threads=1)
    started = time.perf_counter()
    await asyncio.gather(*(runner.run("go") for _ in range(3)))
    assert time.perf_counter() - started >= 0.9


async def test_a_sync_handler_runs_off_the_loop_and_sees_the_callers_context_variables() -> None:
    REQUEST.set("req-7")
    result = await TurnRunner(model=CallOnce("where"), tools=[where]).run("go")
    thread, seen = (result.output or "").split()
    assert int(thread) != threading.get_ident()
    assert seen == "req-7"


async def test_an_async_handler_runs_on_the_event_loop_thread() -> None:
    result = await TurnRunner(model=CallOnce("where_async"), tools=[where_async]).run("go")
    assert result.output == str(threading.get_ident())


async def test_an_aborted_turn_does_not_wait_for_its_sync_handler_which_finishes_in_its_thread(
) -> None:
    entered, finished = threading.Event(), threading.Event()

    @tool
    def stuck(ctx: DispatchContext) -> str:
        """Block until long after the turn is aborted."""
        entered.set()
        time.sleep(1.0)
        finished.set()
        return "late"

    runner = TurnRunner(model=CallOnce("stuck"), tools=[stuck])
    handle = runner.start("go")
    assert await asyncio.to_thread(entered.wait, 5.0)
    started = time.perf_counter()
    handle.abort("enough")
    result = await handle
    assert time.perf_counter() - started < 0.5
    assert result.status == "aborted"
    assert not finished.is_set()  # the thread is still running: Python cannot stop it
    assert await asyncio.to_thread(finished.wait, 5.0)


@pytest.mark.parametrize("size", [0, -1, True, 2.5], ids=["zero", "negative", "bool", "float"])
def test_a_runner_refuses_tool_threads_that_is_not_an_int_of_at_least_1(size: object) -> None:
    with pytest.raises(InvalidRunnerConfigError, match="tool_threads") as caught:
        TurnRunner(model=CallOnce("where"), tools=[where], tool_threads=size)  # type: ignore[arg-type]
    assert caught.value.fields == ["tool_threads"]


async def test_tool_threads_runs_any_blocking_callable_under_the_same_bound() -> None:
    threads = ToolThreads(2)
    assert repr(threads) == "ToolThreads(size=2)"
    assert threads.size == 2
    assert await threads.run(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        await threads.run(divmod, 1, 0)


async def test_a_sync_handler_that_aborts_from_its_thread_ends_the_turn_at_the_next_step() -> None:
    from pipeline.events import Log

    @tool
    def stopper(ctx: DispatchContext) -> str:
        """Log, then abort the turn."""
        ctx.log.info("stopping", "from a worker thread")
        ctx.abort("enough")
        return "stopped"

    runner = TurnRunner(model=CallOnce("stopper"), tools=[stopper])
    logged: list[tuple[str, int]] = []
    runner.on(Log, lambda event: logged.append((event.kind, threading.get_ident())))
    result = await runner.run("go")
    assert result.status == "aborted"
    assert result.abort_reason == "enough"
    assert [(c.tool, c.is_error, c.results) for c in result.tool_calls] == [
        ("stopper", False, "stopped")
    ]
    assert ("stopping", threading.get_ident()) in logged  # delivered on the loop's thread
