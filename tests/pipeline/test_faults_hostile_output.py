"""Faults: hostile model output stays bounded.

A huge tool name never comes back whole, one response cannot run any number of calls, and a
forged artifact tool a middleware removed does not come back when the next artifact arrives.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

MB = 1024 * 1024


def _size(call: ToolCall) -> int:
    """What a record holds in text: its tool name, arguments and result text."""
    return len(call.tool) + len(json.dumps(dict(call.args))) + len(str(call.results))


def _propose(proposal_id: str, name: str, **args: Any) -> ProposedToolCall:
    return ProposedToolCall(id=proposal_id, name=name, arguments=json.dumps(args))


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@pytest.mark.parametrize(
    "arguments", ['{"text": "x"}', "{not json", "[1, 2]"], ids=["object", "bad-json", "array"]
)
async def test_a_one_megabyte_tool_name_gives_an_error_call_under_one_kilobyte(
    arguments: str,
) -> None:
    """An unknown 1 MB tool name is refused with a record (name, text) under 1 KB."""
    name = "n" * MB
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ProposedToolCall(id="big", name=name, arguments=arguments)])]
    )
    result = await TurnRunner(executor=ToolLoopExecutor(model), tools=[echo]).run("go")
    (call,) = result.tool_calls
    assert call.is_error
    assert _size(call) < 1024
    if arguments.startswith('{"'):  # arguments are checked first; then the name
        assert "unknown tool" in str(call.results)
        assert "echo" in str(call.results)  # it still names the tools the model may use


async def test_calls_beyond_the_per_response_cap_are_answered_and_never_run() -> None:
    """10,000 proposed calls: the first 64 run, every other one is an error record."""
    ran: list[int] = []

    @tool
    def count(n: int) -> str:
        """Count a call."""
        ran.append(n)
        return str(n)

    proposals = [_propose(f"c{n}", "count", n=n) for n in range(10_000)]
    model = ScriptedModel([ModelResponse(tool_calls=proposals)])
    result = await TurnRunner(executor=ToolLoopExecutor(model), tools=[count]).run("go")
    assert result.status == "completed"
    assert ran == list(range(64))
    calls = result.tool_calls
    assert [c.id for c in calls] == [p.id for p in proposals]  # every announced id, in order
    refused = calls[64:]
    assert all(c.is_error for c in refused)
    assert {str(c.results) for c in refused} == {
        "Error: at most 64 tool calls per response; this one was not run."
    }


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
async def test_the_per_response_cap_is_configurable(parallel: bool) -> None:
    """max_calls_per_response=2 runs two calls of five, in both modes; None lifts the cap."""
    ran: list[int] = []

    @tool
    async def count(n: int) -> str:
        """Count a call."""
        ran.append(n)
        return str(n)

    proposals = [_propose(f"c{n}", "count", n=n) for n in range(5)]
    capped = ToolLoopExecutor(
        ScriptedModel([ModelResponse(tool_calls=proposals)]),
        parallel_tool_calls=parallel,
        max_calls_per_response=2,
    )
    result = await TurnRunner(executor=capped, tools=[count]).run("go")
    assert sorted(ran) == [0, 1]
    assert [c.is_error for c in result.tool_calls] == [False, False, True, True, True]
    ran.clear()
    uncapped = ToolLoopExecutor(
        ScriptedModel([ModelResponse(tool_calls=proposals)]), max_calls_per_response=None
    )
    await TurnRunner(executor=uncapped, tools=[count]).run("go")
    assert ran == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("cap", [0, -1, True, 2.5, "64"], ids=repr)
def test_a_bad_per_response_cap_is_refused(cap: object) -> None:
    """The cap must be an int of at least 1 (or None)."""
    with pytest.raises(ValueError, match="max_calls_per_response"):
        ToolLoopExecutor(ScriptedModel([]), max_calls_per_response=cap)  # type: ignore[arg-type]


async def test_a_forged_tool_a_middleware_unregistered_stays_gone_after_the_next_artifact() -> None:
    """``artifact_cat`` removed after the first artifact is not re-forged by the second one."""

    @tool
    def fetch(page: int) -> str:
        """Fetch a long page."""
        return "\n".join(f"page {page} row {i}" for i in range(500))

    trim = Middleware("trim")

    @trim.dispatch_input
    def drop_cat_once(ctx: DispatchContext) -> None:
        if ctx.iteration == 1:  # the first artifact's tools were just forged
            assert ctx.tools.has("artifact_cat")
            ctx.tools.unregister("artifact_cat")

    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[_propose("p1", "fetch", page=1)]),
            ModelResponse(tool_calls=[_propose("p2", "fetch", page=2)]),
            ModelResponse(tool_calls=[_propose("cat", "artifact_cat", call_id="p2")]),
        ]
    )
    result = await TurnRunner(
        executor=ToolLoopExecutor(model), tools=[fetch], middleware=[trim]
    ).run("go")
    assert result.status == "completed"
    assert isinstance(result.tool_calls[1].results, SpooledArtifact)  # a second artifact
    offered = [[t["name"] for t in request.tools] for request in model.requests]
    assert "artifact_cat" not in offered[1]  # removed once forged for the first artifact
    assert "artifact_grep" in offered[2]  # re-forged for the second artifact...
    assert "artifact_cat" not in offered[2]  # ...without the removed tool
    cat = result.tool_calls[2]
    assert cat.is_error
    assert "unknown tool 'artifact_cat'" in str(cat.results)
