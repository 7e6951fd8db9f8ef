"""`IterationBudget` and `ToolPolicy`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from middleware import IterationBudget, ToolPolicy
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import Decision, ToolCall, ToolDecision
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel, make_dispatch_context


async def end() -> None:
    return None


# -- IterationBudget ------------------------------------------------------------------------


async def test_the_budget_nacks_at_its_iteration_before_the_model_is_called(
    make_runner: Callable[..., TurnRunner], repeating: Callable[..., Any]
) -> None:
    """IterationBudget(2) lets two iterations run, then fails the dispatch with a policy error."""
    model = repeating("poll", {"job": "j"})
    result = await make_runner(model, [IterationBudget(2)], max_iterations=50).run("go")
    assert result.status == "failed"
    assert len(model.offered) == 2
    assert result.iterations == 3
    error = result.errors[-1]
    assert isinstance(error, PolicyViolationError)
    assert error.policy == "loopware.budget"
    assert error.details == {"max_iterations": 2, "iteration": 2}
    assert error.message == "budget: iteration budget of 2 spent"


async def test_the_budget_leaves_short_turns_alone(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """A turn that finishes within the budget completes normally."""
    model = plan_model([("poll", {"job": "j"})])
    result = await make_runner(model, [IterationBudget(2)]).run("go")
    assert result.status == "completed"
    assert "loopware" not in result.stash


async def test_the_budget_does_not_nack_an_already_signalled_dispatch() -> None:
    """A dispatch already nacked by someone else is left as it is."""
    ctx = make_dispatch_context(iteration=5)
    ctx.nack()
    await IterationBudget(1).check(ctx, end)
    assert not isinstance(ctx.nack_error, PolicyViolationError)


@pytest.mark.parametrize("value", [0, -1, "3", 2.0, True, None])
def test_the_budget_validates_max_iterations(value: Any) -> None:
    """max_iterations must be an int >= 1."""
    with pytest.raises(InvalidMiddlewareConfigError, match="max_iterations"):
        IterationBudget(value)


def test_the_budget_repr() -> None:
    """The repr shows the configuration."""
    budget = IterationBudget(7)
    assert repr(budget) == "IterationBudget(7, namespace='loopware.budget')"
    assert budget.max_iterations == 7


# -- ToolPolicy -----------------------------------------------------------------------------


async def test_a_denied_tool_is_never_offered_and_a_call_to_it_is_refused(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """deny=["shell*"]: shell_exec is not offered, and a stubborn call never runs its handler;
    the model reads that the policy withdrew it and why (not "unknown tool")."""
    model = plan_model([("shell_exec", {"cmd": "rm -rf /"}), ("search", {"q": "a"})], stubborn=True)
    runner = make_runner(model, [ToolPolicy(deny=["shell*"])])
    result = await runner.run("go")

    assert result.status == "completed"
    assert all("shell_exec" not in offered for offered in model.offered)
    assert all("search" in offered for offered in model.offered)
    refused, allowed = result.tool_calls
    assert refused.tool == "shell_exec"
    assert refused.is_error
    assert "shell_exec" not in str(refused.results).split("available", 1)[-1]
    assert str(refused.results).startswith(
        "Error: E_TOOL_UNAVAILABLE: tool 'shell_exec' is no longer available in this turn "
        "(loopware.policy: matches deny pattern 'shell*')"
    )
    assert (refused.ran, refused.verdict) == (False, "denied")
    assert refused.decisions == (
        Decision(
            policy="loopware.policy",
            action="denied",
            reason="the tool was withdrawn: matches deny pattern 'shell*'",
        ),
    )
    assert not allowed.is_error
    assert result.tool_decisions == (
        ToolDecision(
            tool="shell_exec",
            policy="loopware.policy",
            action="withdrawn",
            reason="matches deny pattern 'shell*'",
        ),
    )
    assert "shell_exec" in runner.tools  # the baseline is never edited


async def test_allow_list_keeps_only_matching_tools(
    make_runner: Callable[..., TurnRunner], plan_model: Callable[..., Any]
) -> None:
    """allow=["s*", "fetch"] offers only search, shell_exec and fetch, minus denied ones."""
    model = plan_model([])
    result = await make_runner(model, [ToolPolicy(allow=["s*", "fetch"], deny=["shell*"])]).run(
        "go"
    )
    assert model.offered == [["search", "fetch"]]
    reasons = {d.tool: d.reason for d in result.tool_decisions}
    assert reasons == {
        "poll": "matches no allow pattern",
        "shell_exec": "matches deny pattern 'shell*'",
        "explode": "matches no allow pattern",
    }


async def test_patterns_match_case_sensitively() -> None:
    """fnmatchcase semantics: "Shell*" does not deny "shell_exec"."""
    policy = ToolPolicy(deny=["Shell*", "fetc?", "[ab]*"])
    assert policy.refusal("shell_exec") is None
    assert policy.refusal("fetch") == "matches deny pattern 'fetc?'"
    assert policy.refusal("apple") == "matches deny pattern '[ab]*'"
    assert policy.refusal("search") is None


async def test_tools_registered_after_turn_input_are_refused_as_they_arrive() -> None:
    """The policy guards the turn registry: a denied tool registered later never gets in."""

    @tool
    def shell_late(cmd: str) -> str:
        """Registered late."""
        return cmd

    @tool
    def search_late(query: str) -> str:
        """Also registered late, and permitted."""
        return query

    ctx = make_dispatch_context()
    ToolPolicy(deny=["shell*"]).restrict(ctx.turn)
    assert ctx.tools.register(shell_late) is False
    assert ctx.tools.register(search_late) is True
    assert [t.name for t in ctx.tools.all()] == ["search_late"]
    assert [(d.tool, d.action) for d in ctx.tool_decisions] == [("shell_late", "withdrawn")]


async def test_a_deny_pattern_on_artifact_tools_keeps_forged_tools_away() -> None:
    """Forged artifact tools matching a deny pattern are never offered to the model."""

    @tool
    def big() -> str:
        """A long result."""
        return "x\n" * 10_000

    steps = [
        ModelResponse(tool_calls=[ProposedToolCall(id="b", name="big", arguments="{}")]),
        ModelResponse(text="done"),
    ]
    model = ScriptedModel(steps)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[big],
        middleware=[ToolPolicy(deny=["artifact_grep", "artifact_cat"])],
    )
    result = await runner.run("go")
    assert result.status == "completed"
    offered = [t["name"] for t in model.requests[1].tools]
    assert "artifact_head" in offered
    assert "artifact_grep" not in offered
    assert "artifact_cat" not in offered


async def test_a_denied_call_that_ran_nacks_the_dispatch(call: Callable[..., ToolCall]) -> None:
    """A completed call to a denied tool means the policy was bypassed: the dispatch nacks."""
    ran = call("shell_exec", {"cmd": "ls"})
    ctx = make_dispatch_context(tool_calls=[ran])
    ToolPolicy(deny=["shell*"]).enforce(ctx)
    error = ctx.nack_error
    assert isinstance(error, PolicyViolationError)
    assert error.policy == "loopware.policy"
    assert error.details["call_id"] == ran.id
    assert error.message.endswith("the call ran despite the policy")


async def test_a_call_to_a_denied_tool_that_never_ran_does_not_nack(
    call: Callable[..., ToolCall],
) -> None:
    """A record that says its handler never ran (the executor refused it) bypassed nothing."""
    ctx = make_dispatch_context(tool_calls=[call("shell_exec", is_error=True)])
    ToolPolicy(deny=["shell*"]).enforce(ctx)
    assert not ctx.is_signalled


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"deny": "shell*"}, "deny must be a collection"),
        ({"allow": "search"}, "allow must be a collection"),
        ({"deny": [""]}, "non-empty strings"),
        ({"allow": [None]}, "non-empty strings"),
        ({"deny": 3}, "deny must be a collection"),
        ({"namespace": "x."}, "namespace"),
    ],
    ids=["deny-str", "allow-str", "deny-empty", "allow-none-item", "deny-int", "namespace"],
)
def test_policy_options_are_validated(options: dict[str, Any], match: str) -> None:
    """Pattern lists must be collections of non-empty strings."""
    with pytest.raises(InvalidMiddlewareConfigError, match=match):
        ToolPolicy(**options)


def test_policy_repr_and_properties() -> None:
    """The repr and properties reflect the options."""
    policy = ToolPolicy(allow=["a*"], deny=("b",))
    assert repr(policy) == "ToolPolicy(allow=['a*'], deny=['b'], namespace='loopware.policy')"
    assert policy.allow == ("a*",)
    assert policy.deny == ("b",)
    assert ToolPolicy().allow is None
