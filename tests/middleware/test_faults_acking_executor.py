"""Faults: the built-ins observe calls an executor stored and acked in one invocation.

Issue 18, item 9: the seeds' executor pattern stores its calls and acks in the same invocation,
so that iteration's ``dispatch_output`` never runs. `ToolCallCounter`, `ToolCallLimit`,
`RepetitionDetector` and `ToolPolicy` still see every stored call (in ``turn_output``); a
denied tool that ran fails the turn with `PolicyViolationError`, since the dispatch is acked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import pytest

from middleware import Middleware, RepetitionDetector, ToolCallCounter, ToolCallLimit, ToolPolicy
from pipeline import (
    CallNext,
    DispatchContext,
    Message,
    PolicyViolationError,
    ToolCall,
    TurnContext,
    TurnRunner,
)

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
    decisions = result.stash["loopware"]["policy"]["decisions"]
    assert [(d["call_id"], d["action"]) for d in decisions] == [("c", "denied")]
    assert "ran despite the policy" in decisions[0]["reason"]


async def test_the_policy_records_a_denied_call_that_did_not_run_and_completes() -> None:
    """A denied tool's error record in an acked dispatch is recorded; the turn completes."""
    batch = (_record("a", "search"), _record("c", "shell_exec", is_error=True))
    result = await TurnRunner(
        executor=storing_and_acking(batch), middleware=[ToolPolicy(deny=["shell*"])]
    ).run("go")
    assert result.status == "completed"
    decisions = result.stash["loopware"]["policy"]["decisions"]
    assert [(d["call_id"], d["action"]) for d in decisions] == [("c", "denied")]


async def test_the_limit_counts_calls_stored_by_an_acking_executor() -> None:
    """`ToolCallLimit` counts an acking executor's calls toward its limits."""
    batch = (_record("a", "search", "1"), _record("b", "search", "2"), _record("c", "fetch"))
    result = await TurnRunner(
        executor=storing_and_acking(batch),
        middleware=[ToolCallLimit({"search": 5}, total=10)],
    ).run("go")
    limit = result.stash["loopware"]["limit"]
    assert limit["completed"] == {"search": 2}
    assert limit["total"] == 3


@pytest.mark.parametrize(
    ("on_repeat", "status"),
    [("warn", "completed"), ("nack", "failed")],
    ids=["warn", "nack"],
)
async def test_repetition_sees_repeats_stored_by_an_acking_executor(
    on_repeat: str, status: str
) -> None:
    """Three identical calls stored and acked at once trigger the detector ("nack" fails)."""
    batch = tuple(_record(f"r{n}", "search", "same") for n in range(3))
    detector = RepetitionDetector(threshold=3, on_repeat=on_repeat)  # type: ignore[arg-type]
    result = await TurnRunner(executor=storing_and_acking(batch), middleware=[detector]).run("go")
    assert result.status == status
    decisions = result.stash["loopware"]["repetition"]["decisions"]
    assert [d["call_id"] for d in decisions] == ["r0"]  # checked once all three are stored
    if status == "failed":
        assert isinstance(result.errors[0], PolicyViolationError)


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
