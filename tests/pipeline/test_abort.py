"""Abort: TurnHandle.abort, TurnAbortedError anywhere, boundaries, store safety."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import Middleware
from pipeline import DispatchContext, Gate, Tool, ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.errors import TurnAbortedError
from pipeline.events import DispatchEnd, Event, GateClosed, GateOpened, TurnEnd, TurnStart
from pipeline.models import Message, ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel


def calls(*items: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        tool_calls=[
            ProposedToolCall(id=f"c{i}", name=name, arguments=json.dumps(args))
            for i, (name, args) in enumerate(items)
        ]
    )


async def test_turn_handle_aborts_a_running_turn(
    nap_tool: Tool[BaseModel], nap_started: asyncio.Event, nap_cancelled: list[str]
) -> None:
    """runner.start() gives a handle whose abort() ends the turn aborted with the reason."""
    model = ScriptedModel([calls(("nap", {"seconds": 2.0, "label": "a"}))])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[nap_tool])
    handle = runner.start("go")
    assert handle.turn_id.startswith("turn_")
    assert not handle.done()
    assert "done=False" in repr(handle)
    await asyncio.wait_for(nap_started.wait(), 1.0)
    handle.abort("stop")
    result = await handle
    assert handle.done()
    assert result.turn_id == handle.turn_id
    assert result.status == "aborted"
    assert result.abort_reason == "stop"
    assert result.iterations == 1
    assert nap_cancelled == ["a"]
    with pytest.raises(TurnAbortedError, match="stop"):
        result.raise_for_status()


async def test_abort_after_the_turn_finished_is_a_no_op() -> None:
    """Aborting a finished turn changes nothing."""
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])))
    handle = runner.start("go")
    result = await handle
    handle.abort("too late")
    assert result.status == "completed"
    assert result.output == "done"


async def test_first_abort_reason_wins() -> None:
    """abort() is idempotent: a second call keeps the first reason."""

    async def twice(ctx: TurnContext, call_next: CallNext) -> None:
        ctx.abort("first")
        ctx.abort("second")
        assert ctx.aborted
        await call_next()

    plain = Middleware("plain")
    plain.turn_input(twice)
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), middleware=[plain])
    result = await runner.run("go")
    assert (result.status, result.abort_reason) == ("aborted", "first")


async def test_abort_from_outside_during_a_slow_model_call_is_prompt() -> None:
    """An outside abort cancels an in-flight model call at once."""
    entered = asyncio.Event()

    class SlowModel:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            entered.set()
            await asyncio.sleep(2.0)
            return ModelResponse(text="late")

    runner = TurnRunner(executor=ToolLoopExecutor(SlowModel()))
    handle = runner.start("go")
    await asyncio.wait_for(entered.wait(), 1.0)
    t0 = time.perf_counter()
    handle.abort()
    result = await handle
    assert time.perf_counter() - t0 < 0.1
    assert result.status == "aborted"
    assert result.abort_reason is None
    assert result.output is None


@pytest.mark.parametrize(
    "where", ["turn_input", "dispatch_input", "dispatch_output", "turn_output"]
)
async def test_raising_turn_aborted_error_in_middleware_aborts_the_turn(
    where: str, echo_tool: Tool[BaseModel], record: Callable[[TurnRunner], list[Event]]
) -> None:
    """Raising TurnAbortedError in any stage is the same as abort(): aborted, not failed."""

    async def raiser(ctx: Any, call_next: CallNext) -> None:
        raise TurnAbortedError("enough", stage=where)

    model = ScriptedModel([calls(("echo", {"text": "x"})), ModelResponse(text="done")])
    plain = Middleware("plain")
    getattr(plain, where)(raiser)
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool], middleware=[plain])
    events = record(runner)
    result = await runner.run("go")
    assert result.status == "aborted"
    assert result.abort_reason == "enough"
    assert result.errors == ()
    ends = [e for e in events if isinstance(e, TurnEnd)]
    assert [e.status for e in ends] == ["aborted"]


async def test_raising_turn_aborted_error_in_a_tool_aborts_the_turn() -> None:
    """A tool handler raising TurnAbortedError aborts the turn instead of becoming an error call."""

    @tool
    def quit_now() -> str:
        """Stop everything."""
        raise TurnAbortedError("tool said stop")

    model = ScriptedModel([calls(("quit_now", {})), ModelResponse(text="never")])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[quit_now])
    result = await runner.run("go")
    assert result.status == "aborted"
    assert result.abort_reason == "tool said stop"
    # the announced call is answered with an error record
    assert [(c.id, c.is_error) for c in result.tool_calls] == [("c0", True)]
    assert len(model.requests) == 1


async def test_raising_turn_aborted_error_in_the_executor_aborts_the_turn(
    record: Callable[[TurnRunner], list[Event]],
) -> None:
    """An executor raising TurnAbortedError ends the dispatch and the turn aborted."""

    async def executor(ctx: DispatchContext) -> None:
        raise TurnAbortedError("executor gave up")

    runner = TurnRunner(executor=executor)
    events = record(runner)
    result = await runner.run("go")
    assert result.status == "aborted"
    assert result.abort_reason == "executor gave up"
    assert result.errors == ()
    dispatch_end = next(e for e in events if isinstance(e, DispatchEnd))
    assert dispatch_end.status == "aborted"


async def test_abort_in_dispatch_output_stops_at_the_next_step_boundary(
    echo_tool: Tool[BaseModel],
) -> None:
    """An abort in dispatch output lets the stage unwind, then no further iteration runs."""
    log: list[str] = []

    async def aborting(ctx: DispatchContext, call_next: CallNext) -> None:
        ctx.abort("halt")
        await call_next()
        log.append(f"unwound {ctx.iteration}")

    model = ScriptedModel([calls(("echo", {"text": "x"})), ModelResponse(text="done")])
    plain = Middleware("plain")
    plain.dispatch_output(aborting)
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool], middleware=[plain])
    result = await runner.run("go")
    assert result.status == "aborted"
    assert log == ["unwound 0"]
    assert len(model.requests) == 1
    assert [c.tool for c in result.tool_calls] == ["echo"]


async def test_outside_abort_keeps_calls_stored_before_it(
    echo_tool: Tool[BaseModel], nap_tool: Tool[BaseModel], nap_started: asyncio.Event
) -> None:
    """Calls completed before an outside abort stay in the result and the store."""
    model = ScriptedModel(
        [calls(("echo", {"text": "first"}), ("nap", {"seconds": 2.0, "label": "second"}))]
    )
    store = MemoryStore()
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool, nap_tool], store=store)
    handle = runner.start("go", conversation_id="c")
    await asyncio.wait_for(nap_started.wait(), 1.0)
    handle.abort("stop")
    result = await handle
    assert result.status == "aborted"
    # the interrupted call is answered with an error record
    assert [(c.tool, c.is_error) for c in result.tool_calls] == [("echo", False), ("nap", True)]
    _, stored = await store.load_conversation("c")
    assert [(c.tool, c.is_error) for c in stored] == [("echo", False), ("nap", True)]


class SlowStore(MemoryStore):
    """A store whose tool-call writes take a while and signal when they start."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()
        self.written: list[str] = []

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        self.writing.set()
        await asyncio.sleep(0.03)
        await super().save_tool_call(conversation_id, turn_id, call)
        self.written.append(call.id)


async def test_outside_abort_never_cuts_a_store_write_in_half(echo_tool: Tool[BaseModel]) -> None:
    """An abort arriving mid-write lets the write finish and record the call, then aborts."""
    store = SlowStore()
    model = ScriptedModel(
        [calls(("echo", {"text": "a"}), ("echo", {"text": "b"})), ModelResponse(text="done")]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool], store=store)
    handle = runner.start("go", conversation_id="c")
    await asyncio.wait_for(store.writing.wait(), 1.0)
    t0 = time.perf_counter()
    handle.abort("mid-write")
    result = await handle
    assert time.perf_counter() - t0 < 0.1
    assert result.status == "aborted"
    # c0's write finished whole; c1 never ran and is answered with an error
    assert store.written == ["c0", "c1"]
    assert [(c.id, c.is_error) for c in result.tool_calls] == [("c0", False), ("c1", True)]


class SlowSecondWriteStore(MemoryStore):
    """A store whose second tool-call write (the mutation) takes a while."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.mutating = asyncio.Event()

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        self.writes += 1
        if self.writes == 2:
            self.mutating.set()
            await asyncio.sleep(0.03)
        await super().save_tool_call(conversation_id, turn_id, call)


async def test_outside_abort_never_cuts_a_mutation_in_half() -> None:
    """An abort arriving mid-mutate lets it finish: the turn and the store agree on the call."""
    store = SlowSecondWriteStore()

    async def mutating(ctx: DispatchContext) -> None:
        first = ToolCall.completed(id="a", tool="t", args={}, results="draft")
        await ctx.store_tool_call(first)
        await ctx.mutate_tool_call(dataclasses.replace(first, results="final"))
        await asyncio.sleep(1)

    handle = TurnRunner(executor=mutating, store=store).start("go", conversation_id="c")
    await asyncio.wait_for(store.mutating.wait(), 1.0)
    handle.abort("mid-mutation")
    result = await handle
    assert result.status == "aborted"
    _, stored = await store.load_conversation("c")
    assert [c.results for c in stored] == ["final"]
    assert [c.results for c in result.tool_calls] == ["final"]


async def test_timeout_around_run_cancels_and_records_an_aborted_turn(
    nap_tool: Tool[BaseModel], record: Callable[[TurnRunner], list[Event]]
) -> None:
    """asyncio.wait_for around run() cancels the turn; a TurnEnd(aborted) is still emitted."""
    model = ScriptedModel([calls(("nap", {"seconds": 2.0, "label": "slow"}))])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[nap_tool])
    events = record(runner)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(runner.run("go"), 0.05)
    ends = [e for e in events if isinstance(e, TurnEnd)]
    assert [e.status for e in ends] == ["aborted"]


async def test_wait_for_after_abort_raises_turn_aborted() -> None:
    """A gate opened after the turn was aborted fails at once with TurnAbortedError."""
    seen: list[BaseException] = []

    async def executor(ctx: DispatchContext) -> None:
        ctx.abort("no gates now")
        try:
            await ctx.wait_for(Gate(id="g1", reason="approve?"))
        except TurnAbortedError as exc:
            seen.append(exc)
        await ctx.store_message(Message(role="assistant", content="unreachable answer"))

    runner = TurnRunner(executor=executor)
    result = await runner.run("go")
    assert result.status == "aborted"
    assert len(seen) == 1


async def test_caller_cancellation_saves_the_turn_record_as_aborted(
    nap_tool: Tool[BaseModel], nap_started: asyncio.Event
) -> None:
    """The turn is recorded in the store as aborted before CancelledError is re-raised."""
    store = MemoryStore()
    model = ScriptedModel([calls(("nap", {"seconds": 2.0, "label": "slow"}))])
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[nap_tool], store=store)
    turn_ids: list[str] = []
    runner.on(TurnStart, lambda e: turn_ids.append(e.turn_id))
    task = asyncio.create_task(runner.run("go", conversation_id="c"))
    await asyncio.wait_for(nap_started.wait(), 1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = store.turn(turn_ids[0])
    assert record is not None
    assert record.status == "aborted"
    assert record.iterations == 1


async def test_outside_abort_while_waiting_on_a_gate_is_prompt(
    record: Callable[[TurnRunner], list[Event]],
) -> None:
    """An outside abort rejects an open gate and ends the turn aborted at once."""
    seen: list[str] = []

    async def approval(ctx: DispatchContext, call_next: CallNext) -> None:
        try:
            await ctx.wait_for(Gate(id="g1", reason="approve?"))
        except BaseException as exc:
            seen.append(type(exc).__name__)
            raise
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_input(approval)
    runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), middleware=[plain])
    opened = asyncio.Event()
    runner.on(GateOpened, lambda e: opened.set())
    events = record(runner)
    handle = runner.start("go")
    await asyncio.wait_for(opened.wait(), 1.0)
    t0 = time.perf_counter()
    handle.abort("no approval")
    result = await handle
    assert time.perf_counter() - t0 < 0.1
    assert result.status == "aborted"
    assert result.errors == ()
    assert len(seen) == 1
    closed = [e for e in events if isinstance(e, GateClosed)]
    assert [e.result for e in closed] == ["aborted"]
