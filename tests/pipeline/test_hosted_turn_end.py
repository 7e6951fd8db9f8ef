"""A hosted turn that a policy ends while the host's calls are in flight: every call the turn
took has one stored record and one audit row, none of them runs after the end, and a call that
came after the end is `HostedCall.late` (not run, not stored) so a host that runs on, as the MCP
gateway does, can run it in its next turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from middleware import Middleware
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline import DispatchContext
from pipeline.calls import ToolCallContext
from pipeline.errors import TurnAbortedError
from pipeline.hosted import HostedCall, HostedRunner, HostedTurn, HostTool
from pipeline.stages import CallNext

SEARCH = HostTool("search", "Search.", {"type": "object", "properties": {}})


class Host:
    """The host's own handler, counting its runs."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    async def search(self, args: dict[str, Any]) -> object:
        self.runs.append(args)
        await asyncio.sleep(0)
        return "found"


def one_batch_only() -> Middleware:
    """A policy that aborts the turn when a batch with a call closes (after a pause)."""
    stop = Middleware("one_batch")

    @stop.dispatch_output
    async def end_after_batch(ctx: DispatchContext) -> None:
        await asyncio.sleep(0.01)  # a slow check: calls arrive while it runs
        if ctx.new_tool_calls:
            ctx.abort("one batch is enough")

    return stop


def abort_on(call_id: str) -> Middleware:
    """A ``tool_call`` policy that aborts the turn on one call id."""
    stop = Middleware("abort_on")

    @stop.tool_call
    async def abort_there(ctx: ToolCallContext, call_next: CallNext) -> None:
        if ctx.call_id == call_id:
            ctx.dispatch.abort(f"{call_id} ends it")
            return
        await call_next()

    return stop


def rows(sink: JsonlAuditSink) -> list[tuple[str | None, str | None, bool | None]]:
    """The call rows of the audit (call id, decision, ran), after checking the chain holds."""
    try:
        assert sink.verify().ok
        return [
            (row.entry.call_id, row.entry.decision, row.entry.ran)
            for row in sink.rows()
            if row.entry.kind == "tool_call"
        ]
    finally:
        sink.close()


class OneBatchTurn:
    """A hosted turn under `one_batch_only` and an audit log, its first call ``a`` made."""

    def __init__(self, tmp_path: Path) -> None:
        self.audit = JsonlAuditSink(tmp_path / "audit.jsonl")
        self.runner = HostedRunner(middleware=[one_batch_only(), AuditLog(self.audit)])
        self.host = Host()

    async def begin(self) -> tuple[HostedTurn, HostedCall]:
        turn = await self.runner.begin("go")
        turn.offer([SEARCH])
        return turn, await turn.call("a", "search", {"q": "a"}, self.host.search)

    async def call(self, turn: HostedTurn, call_id: str) -> HostedCall:
        return await turn.call(call_id, "search", {"q": call_id}, self.host.search)

    async def call_while_closing(self, turn: HostedTurn, call_id: str) -> HostedCall:
        """Make a call while the batch closes (``dispatch_output`` is running)."""
        closing = asyncio.ensure_future(turn.end_batch())
        await asyncio.sleep(0)
        waiting = await self.call(turn, call_id)
        await closing
        return waiting


async def test_a_call_waiting_for_the_batch_to_close_is_recorded_when_a_policy_ends_the_turn(
    tmp_path: Path,
) -> None:
    case = OneBatchTurn(tmp_path)
    turn, first = await case.begin()
    waiting = await case.call_while_closing(turn, "b")
    result = await turn.finish()
    audit, host = case.audit, case.host

    assert first.forwarded
    assert not waiting.forwarded
    assert not waiting.late
    assert host.runs == [{"q": "a"}]  # the waiting call never ran
    assert result.status == "aborted"
    stored = {call.id: call for call in result.tool_calls}
    assert set(stored) == {"a", "b"}
    assert stored["b"].verdict == "aborted"
    assert not stored["b"].ran
    assert stored["b"].tool == "search"
    assert waiting.record is stored["b"]
    assert "aborted" in waiting.text
    assert rows(audit) == [("a", "allowed", True), ("b", "aborted", False)]


async def test_calls_waiting_for_their_place_after_a_policy_aborted_the_turn_never_run(
    tmp_path: Path,
) -> None:
    """A batch announced in proposal order whose second call aborts the turn: the third,
    started first and waiting for its place, is answered aborted and not run."""
    audit = JsonlAuditSink(tmp_path / "audit.jsonl")
    runner = HostedRunner(middleware=[abort_on("b"), AuditLog(audit)])
    host = Host()
    turn = await runner.begin("go")
    turn.offer([SEARCH])
    turn.announce(["a", "b", "c"])
    c, a, b = await asyncio.gather(
        turn.call("c", "search", {"q": "c"}, host.search),
        turn.call("a", "search", {"q": "a"}, host.search),
        turn.call("b", "search", {"q": "b"}, host.search),
    )
    assert turn.aborted
    result = await turn.finish()

    assert host.runs == [{"q": "a"}]
    assert a.forwarded
    assert not b.forwarded
    assert not c.forwarded
    assert c.record is not None
    assert c.record.verdict == "aborted"
    assert not c.record.ran
    assert result.status == "aborted"
    assert sorted(call.id for call in result.tool_calls) == ["a", "b", "c"]
    audited = rows(audit)
    assert sorted(str(call_id) for call_id, _, _ in audited) == ["a", "b", "c"]  # one row each
    assert ("c", "aborted", False) in audited


async def test_a_call_after_the_turn_ended_is_late_and_neither_run_nor_stored(
    tmp_path: Path,
) -> None:
    case = OneBatchTurn(tmp_path)
    turn, _ = await case.begin()
    await turn.end_batch()
    assert turn.ended
    late = await case.call(turn, "z")
    result = await turn.finish()
    audit, host = case.audit, case.host

    assert late.late
    assert not late.forwarded
    assert "turn has ended" in late.text
    assert host.runs == [{"q": "a"}]
    assert [call.id for call in result.tool_calls] == ["a"]
    assert rows(audit) == [("a", "allowed", True)]


async def test_a_call_asked_again_after_the_end_gets_its_stored_record_once(
    tmp_path: Path,
) -> None:
    """The host asks again for a call the ending turn answered: the same record, no new row."""
    case = OneBatchTurn(tmp_path)
    turn, _ = await case.begin()
    waiting = await case.call_while_closing(turn, "b")
    again = await case.call(turn, "b")
    await turn.finish()
    audit, host = case.audit, case.host

    assert again is waiting
    assert host.runs == [{"q": "a"}]
    assert rows(audit) == [("a", "allowed", True), ("b", "aborted", False)]


async def test_before_the_next_model_call_a_turn_a_policy_aborted_raises_why(
    tmp_path: Path,
) -> None:
    """`before_model` closes the batch and raises the turn's abort: the host stops there, and
    the calls the turn took keep one row each."""
    audit = JsonlAuditSink(tmp_path / "audit.jsonl")
    runner = HostedRunner(middleware=[abort_on("b"), AuditLog(audit)])
    host = Host()
    turn = await runner.begin("go")
    turn.offer([SEARCH])
    await turn.before_model()  # a turn that takes calls: nothing raised
    await turn.call("a", "search", {"q": "a"}, host.search)
    await turn.before_model()
    await turn.call("b", "search", {"q": "b"}, host.search)

    with pytest.raises(TurnAbortedError, match="b ends it") as raised:
        await turn.before_model()

    assert raised.value.code == "E_TURN_ABORTED"
    assert turn.ended
    assert host.runs == [{"q": "a"}]
    # b's hook aborted and returned without deciding: b failed there and never ran
    assert rows(audit) == [("a", "allowed", True), ("b", "failed", False)]
