"""Faults: the built-ins observe calls an executor stored and acked in one invocation.

The seeds' executor pattern stores its calls and acks in the same invocation,
so that iteration's ``dispatch_output`` never runs. `ToolCallCounter`, `ToolCallLimit` and
`ToolPolicy` still see every stored call (in ``turn_output``); a denied tool that ran fails the
turn with `PolicyViolationError`, since the dispatch is acked. `RepetitionDetector` judges each
call in the ``tool_call`` stage, so it sees what such an executor runs through ``ctx.run_tool``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import pytest

from middleware import Middleware, RepetitionDetector, ToolCallCounter, ToolCallLimit, ToolPolicy
from pipeline import DispatchContext, TurnContext, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.errors import PolicyViolationError
from pipeline.models import Message
from pipeline.stages import CallNext


@tool
def search(q: str) -> str:
    """Search."""
    return f"results for {q}"

Executor = Callable[[DispatchContext], Awaitable[None]]


def _record(call_id: str, tool: str, q: str = "x", *, is_error: bool = False) -> ToolCall:
    return ToolCall.completed(
        id=call_id,
        tool=tool,
        args={"q": q},
        results="error" if is_error else "ok",
        is_error=is_error,
    )


def storing_and_acking(*batches: Sequence[ToolCall]) -> Executor:
    """The seeds' pattern: each invocation stores one batch of calls, and the last one acks."""
    remaining = list(batches)

    async def executor(ctx: DispatchContext) -> None:
        batch = remaining.pop(0)
        await ctx.store_message(
            Message(role="assistant", content="", tool_call_ids=tuple(c.id for c in batch))
        )
        for call in batch:
            await ctx.store_tool_call(call)
        if not remaining:
            await ctx.store_message(Message(role="assistant", content="done"))
            ctx.ack()

    return executor


SEEDS_BATCH = (
    _record("a", "search", "1"),
    _record("b", "fetch", "2", is_error=True),
    _record("c", "shell_exec", "3"),  # a denied tool that "ran"
)


async def test_the_counter_counts_calls_stored_by_an_acking_executor() -> None:
    """Three calls stored and acked in one invocation are all counted, failures apart."""
    result = await TurnRunner(
        executor=storing_and_acking(SEEDS_BATCH), middleware=[ToolCallCounter()]
    ).run("go")
    assert result.status == "completed"
    counter = result.stash["loopware"]["counter"]
    assert counter["total"] == {"completed": 2, "failed": 1}
    assert counter["by_tool"]["shell_exec"] == {"completed": 1}


async def test_calls_before_an_acking_iteration_are_counted_once() -> None:
    """A normal iteration, then an acking one: every call is counted exactly once."""
    first = (_record("a", "search"),)
    second = (_record("b", "search", "y"), _record("c", "fetch"))
    result = await TurnRunner(
        executor=storing_and_acking(first, second), middleware=[ToolCallCounter()]
    ).run("go")
    assert result.iterations == 2
    counter = result.stash["loopware"]["counter"]
    assert counter["total"] == {"completed": 3, "failed": 0}
    assert counter["by_tool"] == {"search": {"completed": 2}, "fetch": {"completed": 1}}


async def test_the_policy_fails_the_turn_when_a_denied_tool_ran_in_an_acked_dispatch() -> None:
    """A denied tool that ran in an acked dispatch is recorded and fails the turn."""
    result = await TurnRunner(
        executor=storing_and_acking(SEEDS_BATCH), middleware=[ToolPolicy(deny=["shell*"])]
    ).run("go")
    assert result.status == "failed"
    error = result.errors[0]
    assert isinstance(error, PolicyViolationError)
    assert error.details["call_id"] == "c"
    assert "ran despite the policy" in error.message


async def test_a_denied_tool_s_record_that_did_not_run_lets_the_turn_complete() -> None:
    """A denied tool's error record (its handler never ran) in an acked dispatch bypassed
    nothing: the turn completes."""
    batch = (_record("a", "search"), _record("c", "shell_exec", is_error=True))
    result = await TurnRunner(
        executor=storing_and_acking(batch), middleware=[ToolPolicy(deny=["shell*"])]
    ).run("go")
    assert result.status == "completed"
    assert not result.tool_calls[1].ran


async def test_the_limit_counts_calls_stored_by_an_acking_executor() -> None:
    """`ToolCallLimit` counts an acking executor's calls toward its limits."""
    batch = (_record("a", "search", "1"), _record("b", "search", "2"), _record("c", "fetch"))
    result = await TurnRunner(
        executor=storing_and_acking(batch),
        middleware=[ToolCallLimit({"search": 5}, total=10)],
    ).run("go")
    limit = result.stash["loopware"]["limit"]
    assert limit["used"] == {"search": 2}
    assert limit["total"] == 3


@pytest.mark.parametrize(
    ("on_repeat", "status"),
    [("warn", "completed"), ("nack", "failed")],
    ids=["warn", "nack"],
)
async def test_repetition_judges_the_calls_of_an_acking_executor_that_runs_them(
    on_repeat: str, status: str
) -> None:
    """An executor that runs three identical calls with ``ctx.run_tool`` and acks at once: the
    third is judged in the tool_call stage ("nack" fails the turn)."""

    async def executor(ctx: DispatchContext) -> None:
        ids = tuple(f"r{n}" for n in range(3))
        await ctx.store_message(Message(role="assistant", content="", tool_call_ids=ids))
        for call_id in ids:
            call = await ctx.run_tool("search", '{"q": "same"}', call_id=call_id)
            await ctx.store_tool_call(call)
        await ctx.store_message(Message(role="assistant", content="done"))
        if not ctx.is_signalled:  # a policy may have ended the dispatch
            ctx.ack()

    detector = RepetitionDetector(threshold=3, on_repeat=on_repeat)  # type: ignore[arg-type]
    result = await TurnRunner(executor=executor, tools=[search], middleware=[detector]).run("go")
    assert result.status == status
    if on_repeat == "warn":
        assert [c.verdict for c in result.tool_calls] == ["allowed", "allowed", "warned"]
    else:
        assert isinstance(result.errors[0], PolicyViolationError)
        assert result.errors[0].details["call_id"] == "r2"


async def test_calls_stored_in_turn_output_by_other_middleware_are_observed_too() -> None:
    """The cursor sees calls from anywhere: one stored by an outer turn-output middleware."""
    late = Middleware("late")

    @late.turn_output(order=-10)
    async def store_one(ctx: TurnContext, call_next: CallNext) -> None:
        await ctx.store_tool_call(_record("z", "search", "late"))
        await call_next()

    result = await TurnRunner(
        executor=storing_and_acking((_record("a", "fetch"),)),
        middleware=[late, ToolCallCounter()],
    ).run("go")
    assert result.stash["loopware"]["counter"]["total"] == {"completed": 2, "failed": 0}
