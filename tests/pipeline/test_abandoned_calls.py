"""Calls an abort interrupted: every announced id gets a record that says what really happened.

The call whose handler was running when the turn was aborted says it ran (and for how long);
the calls after it say they never ran; both carry an ``aborted`` decision by ``loopware.turn``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.errors import TurnAbortedError
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel

started: list[str] = []


@tool
async def work(step: str, ctx: DispatchContext) -> str:
    """Do one step; ``wait`` waits until cancelled, ``stop`` aborts the turn."""
    started.append(step)
    if step == "wait":
        await asyncio.get_running_loop().create_future()  # never set: only a cancel ends it
    if step == "stop":
        raise TurnAbortedError("the tool stopped the turn")
    return f"did {step}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    started.clear()


def batch(*steps: str) -> ScriptedModel:
    calls = [
        ProposedToolCall(id=f"c{i}", name="work", arguments=json.dumps({"step": step}))
        for i, step in enumerate(steps)
    ]
    return ScriptedModel([ModelResponse(tool_calls=calls)])


def summary(calls: tuple[ToolCall, ...]) -> list[tuple[str, str, bool, str]]:
    return [(c.id, c.verdict, c.ran, str(c.results)) for c in calls]


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
async def test_an_outside_abort_records_which_call_was_running_and_which_never_started(
    parallel: bool,
) -> None:
    """Aborted while ``c1`` waits: ``c0`` finished, ``c1`` ran (aborted while it ran), ``c2``
    never started when the batch runs one by one."""
    runner = TurnRunner(
        executor=ToolLoopExecutor(batch("a", "wait", "b"), parallel_tool_calls=parallel),
        tools=[work],
    )
    handle = runner.start("go")
    while "wait" not in started:
        await asyncio.sleep(0)
    if parallel:
        while len(started) < 3:
            await asyncio.sleep(0)
    handle.abort("enough")
    result = await handle
    assert result.status == "aborted"
    c0, c1, c2 = result.tool_calls
    assert (c0.verdict, c0.ran, c0.results) == ("allowed", True, "did a")
    assert (c1.verdict, c1.ran) == ("aborted", True)
    assert c1.results == "Error: the turn was aborted while this call ran."
    assert c1.duration_ms is not None
    assert c1.deciding is not None
    assert c1.deciding.policy == "loopware.turn"
    if parallel:  # the batch ran together: c2 had finished before the abort
        assert (c2.verdict, c2.ran, c2.results) == ("allowed", True, "did b")
    else:
        assert (c2.verdict, c2.ran) == ("aborted", False)
        assert c2.results == "Error: the turn was aborted before this call ran."
        assert started == ["a", "wait"]


async def test_a_tool_that_aborts_the_turn_says_it_ran_and_the_rest_never_did() -> None:
    """A handler raising TurnAbortedError ran; the calls after it are answered as not run."""
    runner = TurnRunner(executor=ToolLoopExecutor(batch("a", "stop", "b")), tools=[work])
    result = await runner.run("go")
    assert result.status == "aborted"
    assert [(c.id, c.verdict, c.ran) for c in result.tool_calls] == [
        ("c0", "allowed", True),
        ("c1", "aborted", True),
        ("c2", "aborted", False),
    ]
    assert started == ["a", "stop"]
    assert summary(result.tool_calls)[2][3] == "Error: the turn was aborted before this call ran."


class Interrupt(BaseException):
    """Not an `Exception`: it goes through the loop as a KeyboardInterrupt would."""


async def test_a_batch_broken_by_one_call_records_that_its_siblings_ran() -> None:
    """A sibling raising a BaseException cancels the batch: the one that was running says it
    ran (and did not complete), and the turn's store holds both records."""

    @tool
    async def breaks(step: str) -> str:
        """Raise past the loop once the batch runs."""
        await asyncio.sleep(0.01)
        raise Interrupt(step)

    calls = [
        ProposedToolCall(id="c0", name="work", arguments=json.dumps({"step": "wait"})),
        ProposedToolCall(id="c1", name="breaks", arguments=json.dumps({"step": "x"})),
    ]
    store = MemoryStore()
    runner = TurnRunner(
        executor=ToolLoopExecutor(
            ScriptedModel([ModelResponse(tool_calls=calls)]), parallel_tool_calls=True
        ),
        tools=[work, breaks],
        store=store,
    )
    with pytest.raises(Interrupt):
        await runner.run("go", conversation_id="chat")
    _, stored = await store.load_conversation("chat")
    assert [(c.id, c.tool, c.verdict, c.ran) for c in stored] == [
        ("c0", "work", "failed", True),
        ("c1", "breaks", "failed", True),
    ]
    assert stored[0].results == (
        "Error: the call did not complete (Interrupt in its batch); "
        "it was interrupted while it ran."
    )
    assert stored[0].deciding is not None
    assert stored[0].deciding.policy == "loopware.executor"


async def test_a_custom_executor_s_interrupted_call_keeps_what_its_run_did() -> None:
    """An executor of the user's own aborted mid-call: the turn answers the announced id with
    the run's own record (its tool, that it ran), not an unnamed call that never ran."""

    async def executor(ctx: DispatchContext) -> None:
        await ctx.store_message(Message(role="assistant", content="", tool_call_ids=("c0",)))
        call = await ctx.run_tool("work", json.dumps({"step": "wait"}), call_id="c0")
        await ctx.store_tool_call(call)
        ctx.ack()

    handle = TurnRunner(executor=executor, tools=[work]).start("go")
    while "wait" not in started:
        await asyncio.sleep(0)
    handle.abort("enough")
    result = await handle
    assert result.status == "aborted"
    (call,) = result.tool_calls
    assert (call.id, call.tool, call.verdict, call.ran) == ("c0", "work", "aborted", True)
    assert call.results == "Error: the turn was aborted while this call ran."
    assert call.duration_ms is not None
