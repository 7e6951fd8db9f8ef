"""What the loop counts for middleware: identical calls (`ToolCallContext.identical_calls`) and
which stored calls crossed the ``tool_call`` stage (`TurnView.crossed_tool_call_stage`).

Policies read these instead of keeping per-call state of their own; each test proposes the
calls a hostile model would and reads what a hook saw on every call id.
"""

from __future__ import annotations

import pytest

from middleware import Middleware, ToolCallLimit
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall, ToolCallContext
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

PARALLEL = pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])


@tool(name="search")
def SEARCH(q: str, limit: int = 10) -> str:
    """Search (``limit`` has a default the model may spell out)."""
    return f"results for {q}"


def batch(*calls: tuple[str, str]) -> ModelResponse:
    """One model step proposing ``calls`` (call id, arguments as JSON text) to ``search``."""
    return ModelResponse(
        tool_calls=tuple(ProposedToolCall(id=i, name="search", arguments=a) for i, a in calls)
    )


def seen_by_a_check() -> tuple[Middleware, dict[str, int]]:
    """A ``tool_call`` check that writes down ``identical_calls`` per call id."""
    seen: dict[str, int] = {}
    watcher = Middleware("watcher")

    @watcher.tool_call
    def look(ctx: ToolCallContext) -> None:
        seen[ctx.call_id] = ctx.identical_calls

    return watcher, seen


@PARALLEL
async def test_identical_calls_counts_stored_calls_and_the_earlier_calls_of_the_batch(
    parallel: bool,
) -> None:
    """A batch's earlier identical calls count before they are stored, a spelled-out default
    is the same call, and a call is never counted against itself."""
    watcher, seen = seen_by_a_check()
    x, spelled, other = '{"q": "x"}', '{"limit": 10, "q": "x"}', '{"q": "y"}'
    model = ScriptedModel(
        [
            batch(("a", x), ("b", spelled), ("c", other), ("d", x)),
            batch(("e", x)),
            ModelResponse(text="done"),
        ]
    )
    runner = TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel),
        tools=[SEARCH],
        middleware=[watcher],
    )
    result = await runner.run("go")
    assert result.status == "completed"
    assert seen == {"a": 0, "b": 1, "c": 0, "d": 2, "e": 3}
    assert [c.ran for c in result.tool_calls] == [True] * 5


async def test_a_hook_that_reads_identical_calls_twice_counts_its_call_once() -> None:
    """Reading the count again (a second check, a call resumed at a gate) changes nothing."""
    seen: list[int] = []
    twice = Middleware("twice")

    @twice.tool_call
    def first(ctx: ToolCallContext) -> None:
        seen.append(ctx.identical_calls)

    @twice.tool_call
    def second(ctx: ToolCallContext) -> None:
        seen.append(ctx.identical_calls)

    model = ScriptedModel(
        [batch(("a", '{"q": "x"}'), ("b", '{"q": "x"}')), ModelResponse(text="done")]
    )
    result = await TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=True),
        tools=[SEARCH],
        middleware=[twice],
    ).run("go")
    assert result.status == "completed"
    assert seen == [0, 0, 1, 1]


def _own(call_id: str) -> ToolCall:
    return ToolCall.completed(id=call_id, tool="search", args={"q": "own"}, results="ok")


async def test_crossed_tool_call_stage_tells_the_stage_s_calls_from_an_executor_s_own() -> None:
    """A call run through the stage crosses it; an executor's own record and a call refused
    before the stage (an unknown tool) do not."""
    crossed: dict[str, bool] = {}
    reader = Middleware("reader")

    @reader.tool_call
    def nothing(ctx: ToolCallContext) -> None:
        return None

    @reader.dispatch_output
    def read(ctx: DispatchContext) -> None:
        for call in ctx.new_tool_calls:
            crossed[call.id] = ctx.crossed_tool_call_stage(call.id)

    async def executor(ctx: DispatchContext) -> None:
        if ctx.iteration > 0:
            await ctx.store_message(Message(role="assistant", content="done"))
            ctx.ack()
            return
        ran = await ctx.run_tool("search", '{"q": "x"}', call_id="staged")
        unknown = await ctx.run_tool("serach", '{"q": "x"}', call_id="unknown")
        ids = ("staged", "unknown", "own")
        await ctx.store_message(Message(role="assistant", content="", tool_call_ids=ids))
        for call in (ran, unknown, _own("own")):
            await ctx.store_tool_call(call)

    result = await TurnRunner(executor=executor, tools=[SEARCH], middleware=[reader]).run("go")
    assert result.status == "completed"
    assert crossed == {"staged": True, "unknown": False, "own": False}


async def test_a_limit_counts_each_call_once_whether_it_crossed_the_stage_or_not() -> None:
    """One iteration with two calls run through the stage and two records an executor made
    itself: four runs counted, and the tool hidden at its limit of four."""

    async def executor(ctx: DispatchContext) -> None:
        if ctx.iteration > 0:
            await ctx.store_message(Message(role="assistant", content="done"))
            ctx.ack()
            return
        runs = [await ctx.run_tool("search", {"q": str(i)}, call_id=f"r{i}") for i in range(2)]
        ids = ("r0", "r1", "o0", "o1")
        await ctx.store_message(Message(role="assistant", content="", tool_call_ids=ids))
        for call in (*runs, _own("o0"), _own("o1")):
            await ctx.store_tool_call(call)

    limit = ToolCallLimit({"search": 4})
    result = await TurnRunner(executor=executor, tools=[SEARCH], middleware=[limit]).run("go")
    assert result.status == "completed"
    assert result.stash["loopware"]["limit"]["used"] == {"search": 4}
    assert [(d.tool, d.action, d.call_id) for d in result.tool_decisions] == [
        ("search", "hidden", "o1")
    ]
