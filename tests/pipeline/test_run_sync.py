"""run_sync shares one event loop per runner, with asyncio.run's semantics kept per call."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from middleware import Middleware
from pipeline import ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel

loops: list[asyncio.AbstractEventLoop] = []


@tool
async def where() -> str:
    """Note the running loop."""
    loops.append(asyncio.get_running_loop())
    return "here"


def make_runner(*, middleware: list[object] | None = None) -> TurnRunner:
    steps = [ModelResponse(tool_calls=[ProposedToolCall(id="w", name="where", arguments="{}")])]
    model = ScriptedModel([*steps, ModelResponse(text="done")], cycle=True)
    return TurnRunner(executor=ToolLoopExecutor(model), tools=[where], middleware=middleware or [])


def test_turns_run_on_one_loop_that_close_ends() -> None:
    """Consecutive calls share a loop; close() closes it and the next call opens another."""
    loops.clear()
    runner = make_runner()
    assert runner.run_sync("a").output == "done"
    assert runner.run_sync("b").output == "done"
    first, second = loops
    assert first is second
    assert not first.is_closed()
    runner.close()
    assert first.is_closed()
    runner.close()  # idempotent
    assert runner.run_sync("c").output == "done"
    assert loops[2] is not first


def test_a_collected_runner_closes_its_loop() -> None:
    """Dropping the runner closes the loop: nothing leaks per runner."""
    loops.clear()
    runner = make_runner()
    runner.run_sync("a")
    del runner
    gc.collect()
    assert loops[0].is_closed()


def test_tasks_a_turn_leaves_behind_are_cancelled_before_the_call_returns() -> None:
    """As with asyncio.run, a background task started in a turn does not outlive the call."""
    started: list[asyncio.Task[None]] = []
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    spawner = Middleware("spawner")

    @spawner.turn_input
    async def spawn(ctx: TurnContext, call_next: CallNext) -> None:
        started.append(asyncio.get_running_loop().create_task(forever()))
        await call_next()

    runner = make_runner(middleware=[spawner])
    runner.run_sync("a")
    assert cancelled.is_set()
    assert started[0].cancelled()
    runner.close()


async def test_run_sync_inside_a_running_loop_is_refused() -> None:
    """Calling it from async code raises, as asyncio.run does, and leaves no coroutine behind."""
    runner = make_runner()
    with pytest.raises(RuntimeError, match=r"await runner\.run"):
        runner.run_sync("a")
    assert (await runner.run("b")).output == "done"


def test_threads_calling_at_once_each_complete() -> None:
    """A second thread calling while the shared loop is busy runs on a loop of its own."""
    runner = make_runner()
    outputs: list[str | None] = []
    barrier = threading.Barrier(4)

    def call() -> None:
        barrier.wait()
        for _ in range(5):
            outputs.append(runner.run_sync("x").output)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert outputs == ["done"] * 20
    runner.close()


def test_an_interrupted_call_leaves_a_usable_runner() -> None:
    """A KeyboardInterrupt inside a turn propagates; the next call starts on a fresh loop."""
    loops.clear()
    interrupt = Middleware("interrupt")
    armed = [True]

    @interrupt.turn_input
    async def stop(ctx: TurnContext, call_next: CallNext) -> None:
        loops.append(asyncio.get_running_loop())
        if armed[0]:
            armed[0] = False
            raise KeyboardInterrupt
        await call_next()

    runner = make_runner(middleware=[interrupt])
    with pytest.raises(KeyboardInterrupt):
        runner.run_sync("a")
    assert runner.run_sync("b").output == "done"
    assert loops[0].is_closed()
    assert loops[-1] is not loops[0]
    runner.close()
