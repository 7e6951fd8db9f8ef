"""`ToolCallLimit(scope=..., window=...)`: limits that span a conversation, a key, a time window."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from middleware import ToolCallLimit
from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.calls import LimitReading
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore, SqliteStore, TurnStore
from pipeline.testing import ScriptedModel


class HandClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Refunds:
    """A refund tool whose handler counts its runs (and can be told to fail)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.runs = 0
        self.fail = fail

        @tool
        def refund(order: str) -> str:
            """Refund an order."""
            self.runs += 1
            if self.fail:
                raise RuntimeError("payment provider down")
            return f"refunded {order}"

        @tool
        def lookup(order: str) -> str:
            """Look an order up."""
            return f"order {order}"

        self.tools = (refund, lookup)


def calls(*names: str, prefix: str = "c") -> ModelResponse:
    """One response proposing a parallel batch of calls to ``names``."""
    return ModelResponse(
        tool_calls=[
            ProposedToolCall(id=f"{prefix}{i}", name=n, arguments=json.dumps({"order": str(i)}))
            for i, n in enumerate(names)
        ]
    )


def hostile_turn() -> list[ModelResponse]:
    """A model that floods refund: a batch of 10, look-alike names, then repeats."""
    return [
        calls(*["refund"] * 10, prefix="a"),
        calls("Refund", "refund ", "refund\u200b", "refunds", prefix="b"),
        calls("refund", "refund", prefix="r"),
        calls("refund", prefix="s"),
        ModelResponse(text="done"),
    ]


def runner(
    refunds: Refunds, limit: ToolCallLimit, steps: Sequence[ModelResponse], store: TurnStore
) -> TurnRunner:
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(steps)),
        tools=refunds.tools,
        middleware=[limit],
        store=store,
    )


async def test_a_conversation_limit_holds_across_five_hostile_turns() -> None:
    """Limit 3 per conversation, 5 turns of floods and look-alikes: exactly 3 handler runs."""
    refunds = Refunds()
    store = MemoryStore()
    limit = ToolCallLimit({"refund": 3}, scope="conversation")
    for _ in range(5):
        result = await runner(refunds, limit, hostile_turn(), store).run(
            "refund everything", conversation_id="conv-1"
        )
        assert result.status == "completed"
    assert refunds.runs == 3


async def test_the_turn_scope_still_counts_each_turn_alone() -> None:
    """The default scope: the same 5 turns let 3 runs through in every turn (15)."""
    refunds = Refunds()
    store = MemoryStore()
    limit = ToolCallLimit({"refund": 3})
    for _ in range(5):
        await runner(refunds, limit, hostile_turn(), store).run("go", conversation_id="conv-1")
    assert refunds.runs == 15


async def test_other_conversations_have_counts_of_their_own() -> None:
    """The conversation scope keys by conversation id: a second conversation starts at 0."""
    refunds = Refunds()
    store = MemoryStore()
    limit = ToolCallLimit({"refund": 3}, scope="conversation")
    for conversation in ("a", "a", "b"):
        await runner(refunds, limit, hostile_turn(), store).run("go", conversation_id=conversation)
    assert refunds.runs == 6


async def test_a_per_customer_day_window_frees_slots_when_it_rolls() -> None:
    """3 refunds per customer per day on a hand-moved clock: slots come back a day later."""
    refunds = Refunds()
    store = MemoryStore()
    clock = HandClock()

    def customer(ctx: TurnContext) -> str:
        return str(ctx.stash.get("customer_id"))

    limit = ToolCallLimit(
        {"refund": 3},
        scope=customer,
        window=timedelta(days=1),
        clock=clock,
        scope_name="customer",
    )
    seen: list[int] = []
    results = []
    for advance in (0.0, 12 * 3600.0, 11 * 3600.0, 3600.0 + 1):
        clock.now += advance
        before = refunds.runs
        result = await runner(refunds, limit, hostile_turn(), store).run(
            "refund", stash={"customer_id": "cust-7"}
        )
        seen.append(refunds.runs - before)
        results.append(result)
    assert seen == [3, 0, 0, 3]
    denied = [c for c in results[-1].tool_calls if c.tool == "refund" and c.verdict == "denied"]
    assert denied
    assert "3 of 3 'refund' runs for this customer in the last 1 day are used up" in str(
        denied[0].results
    )
    other = await runner(refunds, limit, hostile_turn(), store).run(
        "refund", stash={"customer_id": "cust-8"}
    )
    assert sum(c.tool == "refund" and c.ran for c in other.tool_calls) == 3


async def test_a_refused_call_hides_the_tool_for_the_rest_of_the_turn() -> None:
    """on_exceed="hide": the refusal also hides refund; the decision names the scope."""
    refunds = Refunds()
    store = MemoryStore()
    limit = ToolCallLimit({"refund": 2}, scope="conversation")
    result = await runner(refunds, limit, hostile_turn(), store).run("go", conversation_id="x")
    assert refunds.runs == 2
    assert [d.tool for d in result.tool_decisions] == ["refund"]
    assert result.tool_decisions[0].reason == (
        "2 of 2 'refund' runs in this conversation are used up"
    )
    assert result.tool_decisions[0].policy == "loopware.limit"


async def test_failed_runs_give_their_slot_back_with_count_successes() -> None:
    """count="successes": a handler that raised releases its slot in the store."""
    refunds = Refunds(fail=True)
    store = MemoryStore()
    limit = ToolCallLimit({"refund": 1}, scope="conversation", count="successes")
    await runner(refunds, limit, [calls("refund", "refund", "refund")], store).run(
        "go", conversation_id="x"
    )
    assert refunds.runs == 3
    refunds.fail = False
    await runner(refunds, limit, [calls("refund", "refund")], store).run(
        "go", conversation_id="x"
    )
    assert refunds.runs == 4


async def test_a_total_limit_spans_tools_and_turns() -> None:
    """total= in the conversation scope: lookups and refunds share 4 slots over turns."""
    refunds = Refunds()
    store = MemoryStore()
    limit = ToolCallLimit(total=4, scope="conversation")
    ran = 0
    for _ in range(3):
        result = await runner(
            refunds, limit, [calls("lookup", "refund", "lookup")], store
        ).run("go", conversation_id="x")
        ran += sum(c.ran for c in result.tool_calls)
    assert ran == 4


async def test_nack_ends_the_dispatch_when_the_conversation_limit_is_reached() -> None:
    """on_exceed="nack": the call beyond the scoped limit fails the dispatch."""
    refunds = Refunds()
    store = MemoryStore()
    limit = ToolCallLimit({"refund": 2}, on_exceed="nack", scope="conversation")
    await runner(refunds, limit, [calls("refund", "refund")], store).run("a", conversation_id="x")
    result = await runner(refunds, limit, [calls("refund")], store).run("b", conversation_id="x")
    assert refunds.runs == 2
    assert result.status == "failed"
    assert any(isinstance(e, PolicyViolationError) for e in result.errors)


async def test_a_key_that_cannot_be_derived_refuses_the_call() -> None:
    """A key callable that gives no key: the call is refused, never run (fails closed)."""
    refunds = Refunds()

    def customer(ctx: TurnContext) -> str:
        found: str = ctx.stash.get("customer_id")  # absent: None, not a key
        return found

    limit = ToolCallLimit({"refund": 3}, scope=customer)
    result = await runner(refunds, limit, [calls("refund")], MemoryStore()).run("go")
    assert refunds.runs == 0
    assert result.tool_calls[0].verdict == "denied"
    assert "its count cannot be kept" in str(result.tool_calls[0].results)


class NotCounting:
    """A store that keeps turns but no counts."""

    async def save_turn(self, record: Any) -> None: ...

    async def save_message(self, conversation_id: Any, turn_id: Any, message: Any) -> None: ...

    async def save_tool_call(self, conversation_id: Any, turn_id: Any, call: Any) -> None: ...

    async def delete_tool_call(self, conversation_id: Any, turn_id: Any, call_id: Any) -> bool:
        return False

    async def load_conversation(self, conversation_id: str) -> tuple[list[Any], list[Any]]:
        return [], []


async def test_a_store_that_keeps_no_counts_refuses_scoped_calls() -> None:
    """Not a CounterStore: a scoped limit refuses the call and says why."""
    refunds = Refunds()
    limit = ToolCallLimit({"refund": 3}, scope="conversation")
    result = await runner(refunds, limit, [calls("refund")], NotCounting()).run(
        "go", conversation_id="x"
    )
    assert refunds.runs == 0
    assert "is not a CounterStore" in str(result.tool_calls[0].results)


async def test_unlimited_tools_run_without_touching_the_store() -> None:
    """A tool with no limit passes the scoped hook untouched."""
    refunds = Refunds()
    limit = ToolCallLimit({"refund": 1}, scope="conversation")
    result = await runner(refunds, limit, [calls("lookup", "lookup")], NotCounting()).run(
        "go", conversation_id="x"
    )
    assert [c.ran for c in result.tool_calls] == [True, True]


async def test_a_conversation_limit_holds_on_an_sqlite_file_across_runners(tmp_path: Any) -> None:
    """Counts kept in SQLite outlive the store object: a reopened store still refuses."""
    refunds = Refunds()
    limit = ToolCallLimit({"refund": 2}, scope="conversation")
    path = tmp_path / "turns.db"
    for _ in range(3):
        async with SqliteStore(path, synchronous="normal") as store:
            await runner(refunds, limit, [calls("refund", "refund")], store).run(
                "go", conversation_id="x"
            )
    assert refunds.runs == 2


async def test_a_refusal_keeps_scope_key_and_count_in_the_record_and_the_audit(
    tmp_path: Any,
) -> None:
    """The refused call's decision carries a LimitReading: stored, reloaded and audited."""
    refunds = Refunds()

    def customer(ctx: TurnContext) -> str:
        return str(ctx.stash.get("customer_id"))

    limit = ToolCallLimit(
        {"refund": 1}, scope=customer, window=timedelta(hours=1), scope_name="customer"
    )
    sink = SqliteAuditSink(tmp_path / "audit.db", synchronous="normal")
    results = []
    async with SqliteStore(tmp_path / "turns.db", synchronous="normal") as store:
        for conversation in ("first", "second"):  # the second turn's call finds the count full
            turn = TurnRunner(
                executor=ToolLoopExecutor(ScriptedModel([calls("refund", prefix=conversation)])),
                tools=refunds.tools,
                middleware=[AuditLog(sink), limit],
                store=store,
            )
            results.append(
                await turn.run("go", stash={"customer_id": "cust-7"}, conversation_id=conversation)
            )
        _, stored = await store.load_conversation("second")
    expected = LimitReading(
        scope="key", key="cust-7", counter="refund", count=1, limit=1, window_s=3600.0
    )
    [refused] = results[1].tool_calls
    assert refused.deciding is not None
    assert refused.deciding.limit == expected
    assert stored[0].decisions == refused.decisions
    [row] = [r.entry for r in sink.rows() if r.entry.call_id == "second0"]
    sink.close()
    assert row.decision == "denied"
    assert json.loads(row.decisions or "")[0]["limit"] == expected.as_dict()
    assert row.reason == "1 of 1 'refund' runs for this customer in the last 1 hour are used up"


def test_scoped_limits_compose_only_their_reservation() -> None:
    """The turn scope keeps its stash hooks; a scoped limit composes its tool_call hook only."""
    turn = [s.name for s in ToolCallLimit({"refund": 1}).middleware_specs()]
    scoped = [s.name for s in ToolCallLimit({"refund": 1}, scope="conversation").middleware_specs()]
    assert len(turn) == 3
    assert len(scoped) == 1
    assert scoped[0].endswith("reserve_scoped")


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"scope": "tenant"}, "scope"),
        ({"scope": 3}, "scope"),
        ({"window": timedelta(hours=1)}, "window"),  # a window on the turn scope
        ({"scope": "conversation", "window": timedelta(0)}, "window"),
        ({"scope": "conversation", "window": 60}, "window"),
        ({"scope": "conversation", "reservation_ttl": timedelta(seconds=-1)}, "reservation_ttl"),
        ({"scope": "conversation", "clock": 5}, "clock"),
        ({"scope": "conversation", "scope_name": " "}, "scope_name"),
    ],
)
def test_nonsense_scope_options_raise_at_construction(
    options: dict[str, Any], option: str
) -> None:
    """Each bad option names itself in InvalidMiddlewareConfigError."""
    with pytest.raises(InvalidMiddlewareConfigError) as err:
        ToolCallLimit({"refund": 1}, **options)
    assert err.value.option == option


def test_the_scope_is_shown() -> None:
    """repr and the scope property show what it counts over."""
    limit = ToolCallLimit({"refund": 1}, scope="conversation")
    assert limit.scope == "conversation"
    assert "scope='conversation'" in repr(limit)
