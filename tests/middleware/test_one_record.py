"""One call, one record: a hostile model tries each way the record used to misstate a call.

For every scenario the same invariants hold: each stored call has exactly one audit row; the row
says what the record says (the verdict, whether the handler ran, the deciding policy); a
handler started exactly for the calls whose record says ``ran``; and what the model read names
the same decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from middleware import ApprovalGate, Middleware, RepetitionDetector, ToolCallLimit, ToolPolicy
from pipeline import Gate
from pipeline.calls import ToolCallContext, ToolCallNext
from pipeline.models import ModelResponse, ProposedToolCall

from ._hostile import PARALLEL, Counted, audit_rows, audit_tool_rows, batch, call, play

CODES = {
    "denied": ("E_CALL_DENIED", "E_TOOL_UNAVAILABLE"),
    "rejected": ("E_CALL_REJECTED",),
    "invalid": ("E_TOOL_NOT_FOUND", "E_INVALID_TOOL_ARGS"),
    "failed": ("E_DISPATCH_PIPELINE_ERROR", "E_ARGS_LOCKED"),
}
"""The codes the model may read for a call of each verdict that did not produce a result."""


def withholding() -> Middleware:
    """A hook that lets the handler run, then withholds its result."""
    redact = Middleware("redact")

    @redact.tool_call
    async def withhold(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        await call_next()
        ctx.deny("the result is classified")

    return redact


def approve_small(gate: Gate) -> bool:
    """Approve refunds of at most 5 (the default is 100)."""
    return bool(int(gate.payload["args"]["q"]) <= 5)


@dataclass(frozen=True)
class Scenario:
    """A hostile script, the stack it meets, and the verdicts each call must end with."""

    steps: Callable[[], Sequence[ModelResponse]]
    stack: Callable[[Counted], list[object]]
    verdicts: dict[str, tuple[str, bool]]
    """``call_id -> (verdict, ran)``."""
    tool_rows: tuple[tuple[str, str, str, str | None], ...] = ()
    """``(tool, action, policy, call_id)`` of the decisions about tools."""


SCENARIOS = {
    "policy-deny-by-name": Scenario(
        lambda: [batch(call("s", "shell", q="rm -rf /"), call("f", "search", q="1"))],
        lambda tools: [ToolPolicy(deny=["shell"])],
        {"s": ("denied", False), "f": ("allowed", True)},
        (("shell", "withdrawn", "loopware.policy", None),),
    ),
    "unknown-and-invalid": Scenario(
        lambda: [
            batch(
                call("u", "serach", q="1"),
                ProposedToolCall(id="j", name="search", arguments="{not json"),
                ProposedToolCall(id="a", name="search", arguments='{"q": 5}'),
                call("ok", "search", q="1"),
            )
        ],
        lambda tools: [],
        {
            "u": ("invalid", False),
            "j": ("invalid", False),
            "a": ("invalid", False),
            "ok": ("allowed", True),
        },
    ),
    "result-withheld-after-it-ran": Scenario(
        lambda: [batch(call("w", "search", q="1"))],
        lambda tools: [withholding()],
        {"w": ("denied", True)},
    ),
    "limit-hides-after-the-second-run": Scenario(
        lambda: [
            batch(call("s1", "search", q="1")),
            batch(call("s2", "search", q="2")),
            batch(call("s3", "search", q="3")),
        ],
        lambda tools: [ToolCallLimit({"search": 2})],
        {"s1": ("allowed", True), "s2": ("allowed", True), "s3": ("denied", False)},
        (("search", "hidden", "loopware.limit", "s2"),),
    ),
    "limit-counts-runs-that-raised": Scenario(
        lambda: [batch(*(call(f"b{i}", "boom", q="x") for i in range(5)))],
        lambda tools: [ToolCallLimit({"boom": 3})],
        {
            **{f"b{i}": ("allowed", True) for i in range(3)},
            **{f"b{i}": ("denied", False) for i in range(3, 5)},
        },
        (("boom", "hidden", "loopware.limit", "b2"),),
    ),
    "approval-said-yes-and-no": Scenario(
        lambda: [batch(call("small", "refund", q="5"), call("big", "refund", q="100"))],
        lambda tools: [ApprovalGate(["refund"], approve_small)],
        {"small": ("approved", True), "big": ("rejected", False)},
    ),
    "repetition-spelled-out-default": Scenario(
        lambda: [
            batch(
                *(
                    ProposedToolCall(id=f"r{i}", name="lookup", arguments=text)
                    for i, text in enumerate(['{"q": "x"}', '{"q": "x", "n": 10}'] * 2)
                )
            )
        ],
        lambda tools: [RepetitionDetector(threshold=3)],
        {
            "r0": ("allowed", True),
            "r1": ("allowed", True),
            "r2": ("denied", False),
            "r3": ("denied", False),
        },
    ),
}


def toolbox(tools: Counted) -> list[Any]:
    """search, shell, boom (raises after it started), refund and lookup (``n`` defaults to
    10)."""
    from pydantic import BaseModel

    from pipeline import DispatchContext, Tool

    class Lookup(BaseModel):
        q: str
        n: int = 10

    def lookup(args: Lookup, ctx: DispatchContext, meta: Any) -> str:
        tools.runs.append(("lookup", args.q))
        return "found"

    return [
        tools.tool("search"),
        tools.tool("shell"),
        tools.tool("boom", fails_on="x"),
        tools.tool("refund"),
        Tool(name="lookup", description="Look up.", input_schema=Lookup, handler=lookup),
    ]


@PARALLEL
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_every_call_has_one_row_that_says_what_its_record_says(
    name: str, parallel: bool, tmp_path: Path
) -> None:
    """One audit row per call id, equal to the record; ``ran`` exactly where a handler ran."""
    scenario = SCENARIOS[name]
    tools = Counted()
    played = await play(
        list(scenario.steps()),
        toolbox(tools),
        scenario.stack(tools),
        parallel=parallel,
        audit=tmp_path / "a.sqlite",
    )
    assert played.verdicts() == scenario.verdicts
    assert set(played.started) == {i for i, (_, ran) in scenario.verdicts.items() if ran}
    rows = audit_rows(tmp_path / "a.sqlite")
    assert set(rows) == set(played.calls)
    for call_id, record in played.calls.items():
        deciding = record.deciding
        assert rows[call_id] == [
            (record.verdict, None if deciding is None else deciding.policy, record.ran)
        ]
        if record.verdict in CODES:
            assert played.read(call_id).startswith(
                tuple(f"Error: {code}" for code in CODES[record.verdict])
            )
    assert played.tools_decided() == [
        (tool, policy, action, call_id) for tool, action, policy, call_id in scenario.tool_rows
    ]
    assert audit_tool_rows(tmp_path / "a.sqlite") == list(scenario.tool_rows)


async def test_the_record_says_how_long_the_handler_ran() -> None:
    """``duration_ms`` is the handler's own time: a 30 ms handler reads at least 25 ms."""
    import asyncio

    from pipeline import Tool

    from ._hostile import Query

    async def slow(args: Query, ctx: Any, meta: Any) -> str:
        await asyncio.sleep(0.03)
        return "late"

    played = await play(
        [batch(call("c1", "slow", q="x"))],
        [Tool(name="slow", description="Slow.", input_schema=Query, handler=slow)],
        [],
    )
    (record,) = played.result.tool_calls
    assert record.duration_ms is not None
    assert 25.0 <= record.duration_ms < 5_000.0
