"""No argument text a model sends can crash a turn: it completes with an error call instead."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel


@tool
def lookup(key: str, limit: int = 3) -> str:
    """Look a key up."""
    return f"{key}:{limit}"


def _run(name: str, arguments: str) -> tuple[str, bool, str]:
    steps = [ModelResponse(tool_calls=[ProposedToolCall(id="c1", name=name, arguments=arguments)])]
    model = ScriptedModel(steps)
    result = asyncio.run(TurnRunner(executor=ToolLoopExecutor(model), tools=[lookup]).run("go"))
    call = result.tool_calls[0]
    assert model.requests[1].tool_calls[0] == call  # the model sees the outcome next iteration
    return result.status, call.is_error, str(call.results)


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(["lookup", "missing", "", "LOOKUP"]),
    arguments=st.one_of(
        st.text(max_size=60),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ).map(json.dumps),
    ),
)
def test_arbitrary_arguments_never_crash_the_turn(name: str, arguments: str) -> None:
    """Any name and argument text yields a completed turn whose call is stored."""
    status, _, text = _run(name, arguments)
    assert status == "completed"
    assert text


def test_arguments_nested_too_deeply_become_an_error_call() -> None:
    """Pathologically deep JSON is refused as an error call, not an executor crash."""
    status, is_error, text = _run("lookup", "[" * 100_000 + "]" * 100_000)
    assert status == "completed"
    assert is_error
    assert "nested too deeply" in text or "must be a JSON object" in text
