"""`TokenBudget`: a turn stops before the model call that would run past its token budget."""

from __future__ import annotations

import pytest

from middleware import TokenBudget
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall, Usage


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class MeteredModel:
    """Asks for a lookup every time, reporting 300 input and 50 output tokens per call."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        call = ProposedToolCall(id=f"c{self.calls}", name="lookup", arguments='{"key": "k"}')
        return ModelResponse(
            tool_calls=[call], usage=Usage(input_tokens=300, output_tokens=50, cached_tokens=100)
        )


async def test_the_budget_stops_the_turn_before_the_next_model_call() -> None:
    """350 tokens a call, a budget of 1,000: three calls run, the fourth is never made."""
    model = MeteredModel()
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[lookup], middleware=[TokenBudget(1_000)]
    )
    result = await runner.run("go")
    assert model.calls == 3
    assert result.status == "failed"
    error = result.errors[-1]
    assert isinstance(error, PolicyViolationError)
    assert error.details == {"budget": "max_total_tokens", "limit": 1_000, "used": 1_050}
    assert result.usage == Usage(input_tokens=900, output_tokens=150, cached_tokens=300)
    assert result.stash["loopware"]["usage"]["calls"] == 3
    assert len(result.tool_calls) == 3  # every call made before the budget ran out is kept


async def test_an_output_budget_counts_output_tokens_only() -> None:
    """max_output_tokens=120: 50 a call, so the third call is the last one made."""
    model = MeteredModel()
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[lookup],
        middleware=[TokenBudget(max_output_tokens=120)],
    )
    result = await runner.run("go")
    assert model.calls == 3
    [error] = result.errors
    assert isinstance(error, PolicyViolationError)
    assert error.message == "token budget: 150 output tokens used, budget 120"


def test_a_budget_is_required_and_checked() -> None:
    """No budget at all, or a budget below 1, is refused at construction."""
    with pytest.raises(InvalidMiddlewareConfigError):
        TokenBudget()
    with pytest.raises(InvalidMiddlewareConfigError):
        TokenBudget(max_input_tokens=0)
    assert "max_input_tokens=10" in repr(TokenBudget(max_input_tokens=10))
