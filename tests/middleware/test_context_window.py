"""`ContextWindow`: every model request within the budget, each call with its result, the system
prompt kept, the conversation begun by a user message; over 500 turns and on random histories."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from middleware import ContextWindow
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.events import Event, Log
from pipeline.models import Message, ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel, make_dispatch_context

SYSTEM = "You are a careful support agent. Answer from the order records only."


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped on 2025-03-0{len(order_id) % 9 + 1}, two parcels, " * 3


def _check_request(request: ModelRequest, window: ContextWindow) -> None:
    """The invariants every request a window shapes must hold."""
    assert request.system_prompt == SYSTEM
    messages = request.messages
    assert messages[0].role == "user"
    announced = [cid for m in messages for cid in m.tool_call_ids]
    assert sorted(c.id for c in request.tool_calls) == sorted(announced)  # each call, its result
    assert window.tokens(request) <= window.max_tokens


async def test_a_500_turn_conversation_stays_within_the_budget_with_every_call_and_result() -> None:
    """Over 500 turns (a call and an answer each) every request fits the budget, keeps the
    system prompt, sends each call with its result and begins with a user message; the oldest
    turns are dropped from the requests only (the store keeps them all)."""
    window = ContextWindow(1500)
    steps = [
        ModelResponse(tool_calls=[ProposedToolCall("c", "lookup", '{"order_id": "A17"}')]),
        ModelResponse(text="Your order shipped; both parcels are on their way."),
    ]
    model = ScriptedModel(steps, cycle=True)
    store = MemoryStore()
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[lookup],
        middleware=[window],
        store=store,
        system_prompt=SYSTEM,
    )
    for n in range(500):
        result = await runner.run(f"Where is my order A17? (asking for the {n}th time)",
                                  conversation_id="customer-42")
        assert result.ok
    assert len(model.requests) == 1000
    for request in model.requests:
        _check_request(request, window)
    last = model.requests[-1]
    assert last.messages[-2].content.startswith("Where is my order A17? (asking for the 499th")
    assert 3 < len(last.messages) < 60  # a window, not the whole conversation
    messages, calls = await store.load_conversation("customer-42")
    assert (len(messages), len(calls)) == (1500, 500)


async def test_the_latest_turn_is_sent_whole_with_a_warning_when_it_alone_is_over() -> None:
    """A current input over the budget is never dropped: the request starts at it, and a
    ``context_window`` warning says so."""
    window = ContextWindow(50)
    old = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    events: list[Event] = []
    ctx = make_dispatch_context(
        messages=[*old, Message(role="user", content="word " * 400)],
        system_prompt=SYSTEM,
        events=events,
    )

    async def call_next() -> None:
        return None

    await window.trim(ctx, call_next)
    request = ctx.model_request()
    assert [m.content[:4] for m in request.messages] == ["word"]
    logs = [e for e in events if isinstance(e, Log)]
    assert [log.kind for log in logs] == ["context_window"]


def test_a_bad_configuration_is_refused() -> None:
    """A budget that is not a positive int, or an unknown encoding, is refused up front."""
    with pytest.raises(InvalidMiddlewareConfigError, match="max_tokens"):
        ContextWindow(0)
    with pytest.raises(InvalidMiddlewareConfigError, match="encoding"):
        ContextWindow(100, encoding="klingon")  # type: ignore[arg-type]


# -- random histories --------------------------------------------------------------------------
@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Message], list[ToolCall]]:
    """A conversation: turns of a user message, steps with calls and results, an answer."""
    words = st.text(alphabet="abc xyz.\n", max_size=300)
    messages: list[Message] = []
    calls: list[ToolCall] = []
    n = 0
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        messages.append(Message(role="user", content=draw(words) or "?"))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            ids = []
            for _ in range(draw(st.integers(min_value=1, max_value=3))):
                n += 1
                ids.append(f"call_{n}")
                calls.append(
                    ToolCall.completed(
                        id=f"call_{n}", tool="lookup", args={"q": draw(words)}, results=draw(words)
                    )
                )
            step = Message(role="assistant", content=draw(words), tool_call_ids=tuple(ids))
            messages.append(step)
        messages.append(Message(role="assistant", content=draw(words)))
    return messages, calls


def _user_starts(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), budget=st.integers(min_value=1, max_value=3000))
async def test_any_history_is_cut_at_a_user_message_keeping_calls_with_results(
    history: tuple[list[Message], list[ToolCall]], budget: int
) -> None:
    """On any history: the request starts at a user message, holds each call its messages
    announce and no other, keeps the system prompt, fits the budget unless the latest turn
    alone does not (then it is that turn), and drops no turn it could have kept."""
    messages, calls = history
    window = ContextWindow(budget)
    ctx = make_dispatch_context(
        messages=messages, history_tool_calls=calls, system_prompt=SYSTEM
    )

    async def call_next() -> None:
        return None

    await window.trim(ctx, call_next)
    request = ctx.model_request()
    start = len(messages) - len(request.messages)
    assert tuple(request.messages) == tuple(messages[start:])
    assert request.system_prompt == SYSTEM
    assert start == 0 or messages[start].role == "user"
    announced = {cid for m in request.messages for cid in m.tool_call_ids}
    assert {c.id for c in request.tool_calls} == announced
    starts = _user_starts(messages)
    if window.tokens(request) > budget:
        assert start == starts[-1]
    earlier = [i for i in starts if i < start]
    if earlier:  # the turn before the window would not have fitted
        tail = messages[earlier[-1] :]
        ids = {cid for m in tail for cid in m.tool_call_ids}
        wider = ModelRequest(SYSTEM, tail, [c for c in calls if c.id in ids], ())
        assert window.tokens(wider) > budget
