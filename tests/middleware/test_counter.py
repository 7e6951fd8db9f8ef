"""`ToolCallCounter`: per-tool and total counts of completed and failed calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from middleware import ToolCallCounter
from pipeline import TurnRunner
from pipeline.calls import ToolCall
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.testing import make_dispatch_context


async def run_output(counter: ToolCallCounter, ctx: Any) -> None:
    async def end() -> None:
        return None

    counter.count(ctx)


async def test_counts_completed_and_failed_per_tool_and_in_total(
    call: Callable[..., ToolCall],
) -> None:
    """Every call of the iteration lands under by_tool.<tool> and total, by outcome."""
    ctx = make_dispatch_context(
        tool_calls=[
            call("search", {"q": "a"}),
            call("search", {"q": "b"}),
            call("fetch", {"url": "u"}, is_error=True),
        ]
    )
    counter = ToolCallCounter()
    await run_output(counter, ctx)
    assert ctx.stash.get("loopware.counter") == {
        "by_tool": {"search": {"completed": 2}, "fetch": {"failed": 1}},
        "total": {"completed": 2, "failed": 1},
    }


async def test_counts_accumulate_across_iterations(call: Callable[..., ToolCall]) -> None:
    """A second iteration adds to the counts already in the stash."""
    ctx = make_dispatch_context(
        stash={"loopware": {"counter": {"total": {"completed": 5, "failed": 0}}}},
        tool_calls=[call("search")],
    )
    await run_output(ToolCallCounter(), ctx)
    assert ctx.stash.get("loopware.counter.total.completed") == 6


async def test_a_custom_namespace_holds_the_counts(call: Callable[..., ToolCall]) -> None:
    """`namespace=` moves the whole layout."""
    ctx = make_dispatch_context(tool_calls=[call("poll")])
    await run_output(ToolCallCounter(namespace="stats.calls"), ctx)
    assert ctx.stash.get("stats.calls.by_tool.poll.completed") == 1
    assert not ctx.stash.has("loopware.counter")


@pytest.mark.parametrize("namespace", ["", "a..b", ".a", "a.", 5, None])
def test_a_bad_namespace_is_refused_at_construction(namespace: Any) -> None:
    """The namespace must be a valid stash path."""
    with pytest.raises(InvalidMiddlewareConfigError, match="namespace"):
        ToolCallCounter(namespace=namespace)


def test_repr_names_the_namespace() -> None:
    """The repr shows the configuration."""
    assert repr(ToolCallCounter()) == "ToolCallCounter(namespace='loopware.counter')"


async def test_in_a_turn_totals_start_at_zero_and_count_every_call(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """Through the runner: zeros at turn start, then one count per stored call."""
    model = plan_model([("search", {"q": "a"}), ("explode", {"n": 1}), ("search", {"q": "b"})])
    runner = make_runner(model, [ToolCallCounter()])
    result = await runner.run("go")
    assert result.status == "completed"
    assert result.stash["loopware"]["counter"] == {
        "total": {"completed": 2, "failed": 1},
        "by_tool": {"search": {"completed": 2}, "explode": {"failed": 1}},
    }
    quiet = await make_runner(plan_model([]), [ToolCallCounter()]).run("nothing to do")
    assert quiet.stash["loopware"]["counter"]["total"] == {"completed": 0, "failed": 0}
