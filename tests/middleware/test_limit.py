"""`ToolCallLimit`: per-tool and total caps on handler runs (or successes), hide or nack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from middleware import ToolCallLimit
from pipeline import TurnRunner
from pipeline.calls import ToolCall, ToolDecision
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.testing import make_dispatch_context


async def test_a_tool_is_hidden_after_its_limit_of_runs(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """ToolCallLimit({"search": 2}) hides search after two runs: a decision about the tool."""
    model = plan_model([("search", {"q": str(i)}) for i in range(5)] + [("fetch", {"url": "u"})])
    result = await make_runner(model, [ToolCallLimit({"search": 2})]).run("go")
    assert result.status == "completed"
    assert [c.tool for c in result.tool_calls] == ["search", "search", "fetch"]
    assert ["search" in offered for offered in model.offered] == [True, True, False, False]
    state = result.stash["loopware"]["limit"]
    assert state["used"] == {"search": 2}  # only limited tools are counted
    assert "total" not in state  # kept only when total= is set
    assert result.tool_decisions == (
        ToolDecision(
            tool="search",
            policy="loopware.limit",
            action="hidden",
            reason="its limit of 2 runs per turn is used up",
            call_id=result.tool_calls[1].id,
        ),
    )


async def test_a_handler_that_raised_used_its_run(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """count="runs" (the default): a failing handler ran, so it uses up the limit."""
    model = plan_model([("explode", {"n": i}) for i in range(4)], stubborn=True)
    result = await make_runner(model, [ToolCallLimit({"explode": 1})]).run("go")
    assert result.status == "completed"
    assert [(c.ran, c.verdict) for c in result.tool_calls] == [
        (True, "allowed"),
        (False, "denied"),
        (False, "denied"),
        (False, "denied"),
    ]
    assert result.stash["loopware"]["limit"]["used"] == {"explode": 1}


async def test_count_successes_never_counts_failed_calls(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """count="successes": failing runs give their slot back and never hide the tool."""
    model = plan_model([("explode", {"n": i}) for i in range(4)])
    limit = ToolCallLimit({"explode": 1}, count="successes")
    result = await make_runner(model, [limit]).run("go")
    assert result.status == "completed"
    assert [c.ran for c in result.tool_calls] == [True] * 4
    assert result.stash["loopware"]["limit"]["used"] == {"explode": 0}  # every slot given back
    assert result.tool_decisions == ()


async def test_total_caps_every_tool(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """total=3 hides every tool once three calls completed, whichever tools they were."""
    model = plan_model(
        [("search", {"q": "a"}), ("fetch", {"url": "b"}), ("poll", {"job": "c"})] * 2
    )
    result = await make_runner(model, [ToolCallLimit(total=3)]).run("go")
    assert result.status == "completed"
    assert len(result.tool_calls) == 3
    assert model.offered[-1] == []
    reasons = {d.reason for d in result.tool_decisions}
    assert reasons == {"the limit of 3 tool runs per turn is used up"}
    assert {d.tool for d in result.tool_decisions} == {"search", "fetch", "poll", "shell_exec",
                                                       "explode"}


async def test_total_keeps_tools_registered_later_hidden(call: Callable[..., ToolCall]) -> None:
    """dispatch_input re-hides after the loop re-forges or another middleware registers tools."""
    from pipeline import tool

    @tool
    def later(x: int) -> str:
        """Registered after the limit was reached."""
        return str(x)

    limit = ToolCallLimit({"search": 1}, total=5)
    ctx = make_dispatch_context(stash={"loopware": {"limit": {"total": 5}}})
    ctx.tools.register(later)

    async def end() -> None:
        return None

    limit.keep_hidden(ctx)
    assert [t.name for t in ctx.tools.hidden()] == ["later"]


async def test_nack_fails_when_a_call_goes_past_the_limit(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """on_exceed="nack" allows the limit and refuses the call beyond it."""
    model = plan_model([("search", {"q": str(i)}) for i in range(5)])
    result = await make_runner(model, [ToolCallLimit({"search": 2}, on_exceed="nack")]).run("go")
    assert result.status == "failed"
    assert len(result.tool_calls) == 3
    error = result.errors[-1]
    assert isinstance(error, PolicyViolationError)
    assert error.policy == "loopware.limit"
    assert error.details["reason"] == "the limit of 2 runs of 'search' per turn is used up"
    assert error.details["call_id"] == result.tool_calls[-1].id
    assert result.tool_calls[-1].verdict == "denied"


async def test_nack_on_total(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """total= with nack fails the dispatch at the first call past the total."""
    model = plan_model([("search", {"q": "a"}), ("fetch", {"url": "b"})] * 3)
    result = await make_runner(model, [ToolCallLimit(total=2, on_exceed="nack")]).run("go")
    assert result.status == "failed"
    assert len(result.tool_calls) == 3
    error = result.errors[-1]
    assert isinstance(error, PolicyViolationError)
    assert error.details["reason"] == "the limit of 2 tool runs per turn is used up"


async def test_a_call_by_stale_name_after_hiding_is_refused(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """A model that ignores the offer and calls the hidden tool by name is refused each time,
    and reads why the tool is gone (never "unknown tool")."""
    model = plan_model([("search", {"q": str(i)}) for i in range(3)], stubborn=True)
    result = await make_runner(model, [ToolCallLimit({"search": 1})]).run("go")
    assert [d.reason for d in result.tool_decisions] == ["its limit of 1 run per turn is used up"]
    assert [c.is_error for c in result.tool_calls] == [False, True, True]
    for stale in result.tool_calls[1:]:
        assert str(stale.results).startswith(
            "Error: E_TOOL_UNAVAILABLE: tool 'search' is no longer available in this turn "
            "(loopware.limit: its limit of 1 run per turn is used up)"
        )
        assert (stale.ran, stale.deciding.policy if stale.deciding else None) == (
            False,
            "loopware.limit",
        )


@pytest.mark.parametrize(
    ("args", "options", "match"),
    [
        ((), {}, "give per-tool limits, total=, or both"),
        (({"search": 0},), {}, r"limits\['search'\] must be an int >= 1"),
        (({"search": "2"},), {}, "must be an int >= 1"),
        (({"": 2},), {}, "keys must be tool names"),
        (({"search*": 2},), {}, r"keys must be tool names \(not patterns\), got 'search\*'"),
        ((["search"],), {}, "limits must map tool names to ints"),
        ((), {"total": 0}, "total must be an int >= 1"),
        (({"search": 1},), {"on_exceed": "warn"}, "on_exceed must be one of"),
        (({"search": 1},), {"count": "completions"}, "count must be one of"),
        (({"search": 1},), {"namespace": ""}, "namespace"),
    ],
    ids=[
        "nothing",
        "zero-limit",
        "str-limit",
        "empty-name",
        "glob-name",
        "not-a-mapping",
        "zero-total",
        "bad-action",
        "bad-count",
        "bad-namespace",
    ],
)
def test_bad_options_raise_at_construction(
    args: tuple[Any, ...], options: dict[str, Any], match: str
) -> None:
    """Every option is validated in __init__."""
    with pytest.raises(InvalidMiddlewareConfigError, match=match):
        ToolCallLimit(*args, **options)


def test_repr_and_properties_show_the_configuration() -> None:
    """The repr and properties reflect the options; limits are read-only."""
    limit = ToolCallLimit({"search": 2}, total=10, on_exceed="nack")
    assert repr(limit) == (
        "ToolCallLimit({'search': 2}, total=10, on_exceed='nack', count='runs', "
        "namespace='loopware.limit')"
    )
    assert limit.total == 10
    assert limit.on_exceed == "nack"
    assert limit.namespace == "loopware.limit"
    with pytest.raises(TypeError):
        limit.limits["search"] = 5  # type: ignore[index]


async def test_a_hidden_artifact_tool_stays_hidden_when_new_artifacts_are_forged() -> None:
    """A limit reached on a forged tool survives re-forging when another artifact arrives."""
    from pipeline import ToolLoopExecutor, TurnRunner, tool
    from pipeline.models import ModelResponse, ProposedToolCall
    from pipeline.testing import ScriptedModel

    @tool
    def logs(name: str) -> str:
        """A long log."""
        return f"{name}\n" * 5_000

    def step(cid: str, tool_name: str, arguments: str) -> ModelResponse:
        return ModelResponse(
            tool_calls=[ProposedToolCall(id=cid, name=tool_name, arguments=arguments)]
        )

    model = ScriptedModel(
        [
            step("a", "logs", '{"name": "a"}'),
            step("g", "artifact_grep", '{"call_id": "a", "pattern": "a"}'),
            step("b", "logs", '{"name": "b"}'),
            ModelResponse(text="done"),
        ]
    )
    limit = ToolCallLimit({"artifact_grep": 1})
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[logs], middleware=[limit])
    assert runner.describe_pipelines()["dispatch_input"] == []
    result = await runner.run("go")
    assert result.status == "completed"
    offered = [[t["name"] for t in request.tools] for request in model.requests]
    assert "artifact_grep" in offered[1]
    assert "artifact_grep" not in offered[2]
    assert "artifact_grep" not in offered[3]  # re-forged for artifact "b", still hidden
    assert "artifact_head" in offered[3]


def test_total_limit_with_hide_keeps_its_dispatch_input_guard() -> None:
    """Only `total=` with hiding needs the per-iteration re-hide hook."""
    from pipeline import ToolLoopExecutor, TurnRunner
    from pipeline.testing import ScriptedModel

    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([])),
        middleware=[ToolCallLimit(total=3)],
    )
    assert runner.describe_pipelines()["dispatch_input"] == ["ToolCallLimit.keep_hidden"]


def test_option_literals_are_public() -> None:
    """OnExceed, LimitCount and OnRepeat are exported with the options the built-ins accept."""
    from typing import get_args

    from middleware import LimitCount, OnExceed, OnRepeat

    assert get_args(OnExceed) == ("hide", "nack")
    assert get_args(LimitCount) == ("runs", "successes")
    assert get_args(OnRepeat) == ("block", "hide", "nack", "warn")
