"""`ModelCallLimit` and `TokenBudget` per turn, per conversation, per key and per window."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from middleware import ModelCallLimit, TokenBudget
from pipeline import ToolLoopExecutor, TurnContext, TurnResult, TurnRunner, tool
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall, Usage
from pipeline.stores import MemoryStore, TurnStore


@tool
def ping(n: int) -> str:
    """Answer pong."""
    return "pong"


class CountingModel:
    """A model that calls ping forever, counting how often it was asked."""

    def __init__(self, usage: Usage | None = None) -> None:
        self.asked = 0
        self.usage = usage or Usage()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.asked += 1
        call = ProposedToolCall(id=f"p{self.asked}", name="ping", arguments=json.dumps({"n": 1}))
        return ModelResponse(tool_calls=[call], usage=self.usage)


class HandClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def run(
    model: CountingModel, policy: object, store: TurnStore, **options: Any
) -> TurnResult:
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[ping], middleware=[policy], store=store,
        max_iterations=50,
    )
    return await runner.run("go", **options)


def violation(result: TurnResult) -> PolicyViolationError:
    [error] = [e for e in result.errors if isinstance(e, PolicyViolationError)]
    return error


async def test_a_turn_model_call_limit_stops_before_the_next_call() -> None:
    """ModelCallLimit(3): the model is asked exactly 3 times per turn, every turn."""
    model = CountingModel()
    store = MemoryStore()
    limit = ModelCallLimit(3)
    results = [await run(model, limit, store, conversation_id="c") for _ in range(2)]
    assert model.asked == 6
    error = violation(results[-1])
    assert error.policy == "loopware.model_limit"
    assert error.details["scope"] == "turn"
    assert "3 of 3 model calls in this turn are used up" in str(error)


async def test_a_conversation_model_call_limit_spans_its_turns() -> None:
    """ModelCallLimit(5, scope="conversation"): 5 model calls over all the turns, no more."""
    model = CountingModel()
    store = MemoryStore()
    limit = ModelCallLimit(5, scope="conversation")
    results = [await run(model, limit, store, conversation_id="c") for _ in range(4)]
    assert model.asked == 5
    assert violation(results[-1]).details == {
        "scope": "conversation",
        "key": "c",
        "counter": "model_calls",
        "count": 5,
        "limit": 5,
        "window_s": None,
    }


async def test_a_keyed_model_call_limit_rolls_with_its_window() -> None:
    """Per tenant per hour on a hand-moved clock: the calls come back when the hour rolls."""
    model = CountingModel()
    store = MemoryStore()
    clock = HandClock()

    def tenant(ctx: TurnContext) -> str:
        return str(ctx.stash.get("tenant"))

    limit = ModelCallLimit(
        2, scope=tenant, window=timedelta(hours=1), clock=clock, scope_name="tenant"
    )
    asked = []
    results = []
    for advance in (0.0, 1800.0, 1801.0):
        clock.now += advance
        before = model.asked
        results.append(await run(model, limit, store, stash={"tenant": "acme"}))
        asked.append(model.asked - before)
    assert asked == [2, 0, 2]
    assert "for this tenant in the last 1 hour" in str(violation(results[-1]))


async def test_a_conversation_token_budget_sums_every_turn() -> None:
    """TokenBudget(1000, scope="conversation"): 300 tokens a call; stops on the 4th call over
    all turns, the turns after it make no call at all."""
    model = CountingModel(Usage(input_tokens=250, output_tokens=50))
    store = MemoryStore()
    budget = TokenBudget(1000, scope="conversation")
    results = [await run(model, budget, store, conversation_id="c") for _ in range(3)]
    assert model.asked == 4
    assert violation(results[-1]).details["count"] == 1200
    assert violation(results[-1]).details["scope"] == "conversation"


async def test_the_turn_token_budget_is_unchanged() -> None:
    """The default scope: each turn has its own 1000 tokens (4 calls each)."""
    model = CountingModel(Usage(input_tokens=250, output_tokens=50))
    store = MemoryStore()
    for _ in range(2):
        await run(model, TokenBudget(1000), store, conversation_id="c")
    assert model.asked == 8


@pytest.mark.parametrize(
    "make",
    [
        lambda: ModelCallLimit(0),
        lambda: ModelCallLimit(3, window=timedelta(hours=1)),
        lambda: ModelCallLimit(3, scope="global"),  # type: ignore[arg-type]
        lambda: TokenBudget(100, window=timedelta(hours=1)),
        lambda: TokenBudget(100, scope="conversation", window=timedelta(seconds=-5)),
    ],
)
def test_nonsense_options_raise_at_construction(make: Any) -> None:
    """Each raises InvalidMiddlewareConfigError."""
    with pytest.raises(InvalidMiddlewareConfigError):
        make()


def test_reprs_and_properties_show_the_scope() -> None:
    """The scope shows in repr and as a property."""
    limit = ModelCallLimit(3, scope="conversation")
    assert (limit.max_calls, limit.scope, limit.namespace) == (
        3,
        "conversation",
        "loopware.model_limit",
    )
    assert "scope='conversation'" in repr(limit)
    assert "scope='conversation'" in repr(TokenBudget(5, scope="conversation"))
    assert "scope" not in repr(TokenBudget(5))
