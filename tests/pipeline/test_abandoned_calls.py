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
from pipeline.models import ModelResponse, ProposedToolCall
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
