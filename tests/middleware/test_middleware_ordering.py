"""Composition of sets and class-based middleware in the runner: order, position, registration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from middleware import Middleware, RepetitionDetector, ToolCallCounter, dispatch_output
from pipeline import DispatchContext, TurnContext, TurnRunner
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel


def recorder(trail: list[str], label: str) -> Callable[..., Any]:
    async def layer(ctx: TurnContext, call_next: CallNext) -> None:
        trail.append(label)
        await call_next()

    layer.__name__ = label
    return layer


def make(middleware: list[object]) -> TurnRunner:
    from pipeline import ToolLoopExecutor

    return TurnRunner(executor=ToolLoopExecutor(ScriptedModel([])), middleware=middleware)


async def test_order_beats_list_position_which_beats_registration_order() -> None:
    """Resolved order: (order, list position, registration order); describe shows it."""
    trail: list[str] = []
    first = Middleware("first")
    second = Middleware("second")
    second.turn_input(recorder(trail, "s_early"))  # registered before anything in `first`
    first.turn_input(recorder(trail, "f_one"))
    first.turn_input(recorder(trail, "f_two"))
    second.turn_input(order=-1)(recorder(trail, "s_outer"))
    first.turn_input(order=2)(recorder(trail, "f_inner"))

    runner = make([first, second])
    expected = ["s_outer", "f_one", "f_two", "s_early", "f_inner"]
    assert runner.describe_pipelines()["turn_input"] == [
        "second.s_outer",
        "first.f_one",
        "first.f_two",
        "second.s_early",
        "first.f_inner",
    ]
    await runner.run("go")
    assert trail == expected


async def test_describe_pipelines_lists_every_stage_including_class_based_items() -> None:
    """Built-ins contribute `<Class>.<method>` names to the stages they hook."""
    custom = Middleware("custom")

    @custom.dispatch_output(order=-5)
    async def first_out(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    runner = make([ToolCallCounter(), custom, RepetitionDetector()])
    assert runner.describe_pipelines() == {
        "turn_input": ["ToolCallCounter.start"],
        "dispatch_input": [],
        "tool_call": ["RepetitionDetector.watch"],
        "dispatch_output": [
            "custom.first_out",
            "ToolCallCounter.count",
        ],
        "turn_output": ["ToolCallCounter.count_late"],
    }


async def test_every_turn_of_a_reused_runner_runs_every_middleware() -> None:
    """Fresh composition state per run: nothing is skipped on the second or third turn."""
    runs: list[str] = []
    mw = Middleware("m")

    @mw.turn_input
    def seen(ctx: TurnContext) -> None:
        runs.append(ctx.turn_id)

    class Closer:
        @dispatch_output
        def close(self, ctx: DispatchContext) -> None:
            runs.append("output")

    runner = make([mw, Closer()])
    for _ in range(3):
        assert (await runner.run("again")).status == "completed"
    assert len([r for r in runs if r.startswith("turn")]) == 3
    assert len(set(runs)) == 3  # three distinct turn ids; output never ran: the model answered


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(-2, 2)),  # (set index, order)
        min_size=1,
        max_size=8,
    )
)
def test_resolved_order_is_sorted_by_order_then_position_then_registration(
    registrations: list[tuple[int, int]],
) -> None:
    """Property: describe order == sort by (order, list position, registration) == run order."""
    import asyncio

    trail: list[str] = []
    sets = [Middleware(f"s{i}") for i in range(3)]
    keyed: list[tuple[int, int, int, str]] = []
    for index, (which, order) in enumerate(registrations):
        label = f"m{index}"
        sets[which].turn_output(order=order)(recorder(trail, label))
        keyed.append((order, which, index, f"s{which}.{label}"))
    runner = make(list(sets))
    expected = [name for *_, name in sorted(keyed)]
    assert runner.describe_pipelines()["turn_output"] == expected
    asyncio.run(runner.run("go"))
    assert [f"s{registrations[int(t[1:])][0]}.{t}" for t in trail] == expected
