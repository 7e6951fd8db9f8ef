"""Faults: an abort or a cancellation mid-batch still answers every announced tool-call id.

A turn aborted from outside (`TurnHandle.abort`) or cancelled by its caller
while a handler runs must store a record for the running call and every later one, so the
conversation's next turn never sends a provider an assistant message whose calls have no
results. The `store` fixture (``tests/pipeline/conftest.py``) runs the store-backed trials on
memory, SQLite and PostgreSQL: a memory write never yields, the database ones always do.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Literal

import pytest

from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.events import ToolCallStored
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore, TurnStore
from pipeline.testing import ScriptedModel

TRIALS = 50
BATCH = 5
ABORTED = "Error: the turn was aborted"

How = Literal["abort", "cancel"]
HELD_MS = 3_600_000.0
"""How long handler ``k`` works: until the interruption, however late a loaded machine
delivers it (a turn that completed on its own would prove nothing)."""


def _announced(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [cid for m in messages if m.role == "assistant" for cid in m.tool_call_ids]


async def _one_trial(
    store: TurnStore, how: How, parallel: bool, rng: random.Random, conversation: str
) -> tuple[int, int]:
    """Run one turn interrupted while handler ``k`` runs; return (announced, answered).

    Answered ids are those with a record in the store (and in the result, when there is one).
    """
    k = rng.randrange(BATCH)
    started = [asyncio.Event() for _ in range(BATCH)]

    @tool
    async def work(n: int, ms: float) -> str:
        """Work for ``ms`` milliseconds."""
        started[n].set()
        await asyncio.sleep(ms / 1000)
        return f"done {n}"

    proposals = [
        ProposedToolCall(
            id=f"call_{n}",
            name="work",
            arguments=json.dumps({"n": n, "ms": HELD_MS if n == k else rng.uniform(0.0, 1.0)}),
        )
        for n in range(BATCH)
    ]
    model = ScriptedModel([ModelResponse(tool_calls=proposals)])
    runner = TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel), tools=[work], store=store
    )
    stored_events: list[ToolCall] = []
    runner.on(ToolCallStored, lambda e: stored_events.append(e.call))
    if how == "abort":
        handle = runner.start("go", conversation_id=conversation)
        await asyncio.wait_for(started[k].wait(), 10.0)
        await asyncio.sleep(rng.uniform(0.0, 0.002))
        handle.abort("stop")
        result = await handle
        assert result.status == "aborted"
        in_result = {c.id for c in result.tool_calls}
        if any(cid not in in_result for cid in _announced(result.messages)):
            return BATCH, 0
    else:
        task = asyncio.create_task(runner.run("go", conversation_id=conversation))
        await asyncio.wait_for(started[k].wait(), 10.0)
        await asyncio.sleep(rng.uniform(0.0, 0.002))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    messages, calls = await store.load_conversation(conversation)
    announced = _announced(list(messages))
    answered = {c.id for c in calls}
    assert answered == {c.id for c in stored_events}
    return len(announced), sum(1 for cid in announced if cid in answered)


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
@pytest.mark.parametrize("how", ["abort", "cancel"], ids=["handle_abort", "caller_cancel"])
async def test_every_announced_call_id_gets_a_record_after_an_interruption(
    store: TurnStore, how: How, parallel: bool
) -> None:
    """Over many interrupted turns, the store holds a record for every id the model announced."""
    rng = random.Random(f"{how}-{parallel}")
    trials = TRIALS if isinstance(store, MemoryStore) else TRIALS // 5
    lost = 0
    for trial in range(trials):
        announced, answered = await _one_trial(store, how, parallel, rng, f"c{trial}")
        assert announced == BATCH
        lost += answered < announced
    assert lost == 0, f"{lost} of {trials} interrupted turns lost tool-call records"


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
async def test_the_interrupted_call_and_later_ones_are_error_records_in_order(
    parallel: bool,
) -> None:
    """The running call reads "while this call ran", later ones "before"; none of them ran."""
    ran: list[int] = []
    gate = asyncio.Event()

    @tool
    async def step(n: int) -> str:
        """Step ``n``; step 1 waits."""
        if n == 1:
            gate.set()
            await asyncio.sleep(10)
        ran.append(n)
        return f"ok {n}"

    proposals = [
        ProposedToolCall(id=f"s{n}", name="step", arguments=json.dumps({"n": n})) for n in range(3)
    ]
    model = ScriptedModel([ModelResponse(tool_calls=proposals)])
    runner = TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel), tools=[step]
    )
    handle = runner.start("go")
    await asyncio.wait_for(gate.wait(), 10.0)
    if parallel:
        await asyncio.sleep(0.01)  # let the siblings finish
    handle.abort("stop")
    result = await handle
    assert [c.id for c in result.tool_calls] == ["s0", "s1", "s2"]
    assert [c.tool for c in result.tool_calls] == ["step"] * 3
    texts = [str(c.results) for c in result.tool_calls]
    if parallel:  # siblings ran concurrently and finished: their real results are kept
        assert sorted(ran) == [0, 2]
        assert [c.is_error for c in result.tool_calls] == [False, True, False]
        assert texts[1] == f"{ABORTED} while this call ran."
    else:
        assert ran == [0]
        assert [c.is_error for c in result.tool_calls] == [False, True, True]
        assert texts[1:] == [f"{ABORTED} while this call ran.", f"{ABORTED} before this call ran."]


async def test_the_next_turn_sees_a_result_for_every_announced_call() -> None:
    """After an interrupted turn, the conversation's next request pairs every id with a call."""
    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait long."""
        gate.set()
        await asyncio.sleep(10)
        return "late"

    first = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ProposedToolCall(id="a", name="slow", arguments="{}"),
                    ProposedToolCall(id="b", name="slow", arguments="{}"),
                ]
            )
        ]
    )
    store = MemoryStore()
    runner = TurnRunner(executor=ToolLoopExecutor(first), tools=[slow], store=store)
    task = asyncio.create_task(runner.run("go", conversation_id="c"))
    await asyncio.wait_for(gate.wait(), 10.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    second = ScriptedModel([ModelResponse(text="fine")])
    await TurnRunner(executor=ToolLoopExecutor(second), store=store).run(
        "again", conversation_id="c"
    )
    request = second.requests[0]
    assert {c.id for c in request.tool_calls} >= set(_announced(list(request.messages)))


async def test_a_custom_executor_interrupted_mid_call_is_answered_by_the_turn() -> None:
    """A custom executor that announces calls and is cancelled mid-call: the turn answers them."""
    gate = asyncio.Event()

    async def seeds_executor(ctx: DispatchContext) -> None:
        await ctx.store_message(
            Message(role="assistant", content="", tool_call_ids=("x1", "x2", "x3"))
        )
        await ctx.store_tool_call(ToolCall.completed(id="x1", tool="t", args={}, results="ok"))
        gate.set()
        await asyncio.sleep(10)  # "running" x2

    store = MemoryStore()
    handle = TurnRunner(executor=seeds_executor, store=store).start("go", conversation_id="c")
    await asyncio.wait_for(gate.wait(), 10.0)
    handle.abort("stop")
    result = await handle
    assert result.status == "aborted"
    assert [c.id for c in result.tool_calls] == ["x1", "x2", "x3"]
    assert [c.is_error for c in result.tool_calls] == [False, True, True]
    assert all(ABORTED in str(c.results) for c in result.tool_calls[1:])
    _, stored = await store.load_conversation("c")
    assert [c.id for c in stored] == ["x1", "x2", "x3"]


async def test_a_second_caller_cancellation_never_cuts_the_answers_in_half() -> None:
    """Cancelled again while the answers are stored: they all land, then the cancel propagates."""
    gate = asyncio.Event()
    writing = asyncio.Event()

    class SlowStore(MemoryStore):
        async def save_tool_call(
            self, conversation_id: str | None, turn_id: str, call: ToolCall
        ) -> None:
            writing.set()
            await asyncio.sleep(0.01)
            await super().save_tool_call(conversation_id, turn_id, call)

    @tool
    async def slow() -> str:
        """Wait long."""
        gate.set()
        await asyncio.sleep(10)
        return "late"

    proposals = [ProposedToolCall(id=f"p{n}", name="slow", arguments="{}") for n in range(3)]
    store = SlowStore()
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([ModelResponse(tool_calls=proposals)])),
        tools=[slow],
        store=store,
    )
    task = asyncio.create_task(runner.run("go", conversation_id="c"))
    await asyncio.wait_for(gate.wait(), 10.0)
    task.cancel()
    await asyncio.wait_for(writing.wait(), 10.0)
    task.cancel()  # again, mid-write
    with pytest.raises(asyncio.CancelledError):
        await task
    _, stored = await store.load_conversation("c")
    assert [c.id for c in stored] == ["p0", "p1", "p2"]
    assert all(c.is_error for c in stored)
    assert [c.tool for c in stored] == ["slow"] * 3  # the executor's own answers, whole
