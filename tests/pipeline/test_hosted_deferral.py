"""Deferred hosted calls: an approval gate paused by the host and decided when it resumes.

A host that pauses a run for an approval (and resumes it later, maybe in another process) runs
the pre-handler hook again for the resumed call: the first time the call is deferred (nothing
runs, nothing is stored, a limit gives its slot back), the second time it is decided once with
the host's decision. The tests count the handler runs and read the audit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline.hosted import HostedRunner, HostTool

DELETE = HostTool("delete", "Delete a file.", {"type": "object"})


class Host:
    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    async def centre(self, args: dict[str, Any]) -> object:
        self.runs.append(args)
        await asyncio.sleep(0)
        return "deleted"


def _runner(sink: JsonlAuditSink) -> HostedRunner:
    return HostedRunner(
        middleware=[
            ToolCallLimit({"delete": 1}),
            RepetitionDetector(threshold=2),
            ApprovalGate(["delete"]),
            AuditLog(sink),
        ]
    )


async def _pause(tmp_path: Path, host: Host) -> dict[str, Any]:
    """The first run: the call defers at its gate; the host keeps the stash as plain data."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        turn = await _runner(sink).begin("go")
        turn.offer([DELETE])
        call = await turn.call("d1", "delete", {"path": "a"}, host.centre, defer=True)
        assert call.deferred
        assert call.record is None
        assert not call.ran
        assert turn.deferred == ("d1",)
        snapshot = turn.snapshot()
        await turn.finish()
    finally:
        sink.close()
    return snapshot


async def _resume(
    tmp_path: Path, host: Host, snapshot: dict[str, Any], approval: bool
) -> tuple[Any, list[str]]:
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        turn = await _runner(sink).begin("go", stash=snapshot)
        turn.offer([DELETE])
        call = await turn.call("d1", "delete", {"path": "a"}, host.centre, approval=approval)
        await turn.finish()
        ids = [str(r.entry.call_id) for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sink.verify().ok
    finally:
        sink.close()
    return call, ids


async def test_an_approved_deferred_call_runs_once_within_its_limit(tmp_path: Path) -> None:
    host = Host()
    snapshot = await _pause(tmp_path, host)
    assert host.runs == []
    call, ids = await _resume(tmp_path, host, snapshot, approval=True)
    assert call.forwarded
    assert call.record is not None
    assert call.record.verdict == "approved"
    assert host.runs == [{"path": "a"}]  # the limit of 1 is not spent twice, no repetition
    assert ids == ["d1"]


async def test_a_rejected_deferred_call_never_runs(tmp_path: Path) -> None:
    host = Host()
    snapshot = await _pause(tmp_path, host)
    call, ids = await _resume(tmp_path, host, snapshot, approval=False)
    assert not call.ran
    assert call.record is not None
    assert call.record.verdict == "rejected"
    assert host.runs == []
    assert ids == ["d1"]


async def test_a_deferred_call_resumed_in_the_same_turn_is_decided_then() -> None:
    host = Host()
    sink_free = HostedRunner(middleware=[ToolCallLimit({"delete": 1}), ApprovalGate(["delete"])])
    turn = await sink_free.begin("go")
    turn.offer([DELETE])
    first = await turn.call("d1", "delete", {}, host.centre, defer=True)
    again = await turn.call("d1", "delete", {}, host.centre, defer=True)
    assert first is again
    assert again.deferred
    approved = await turn.call("d1", "delete", {}, host.centre, approval=True)
    twice = await turn.call("d1", "delete", {}, host.centre, approval=True)
    await turn.finish()
    assert approved is twice
    assert approved.forwarded
    assert len(host.runs) == 1


async def test_a_call_without_defer_waits_at_its_gate_for_a_listener() -> None:
    host = Host()
    runner = HostedRunner(middleware=[ApprovalGate(["delete"])])
    from pipeline.events import GateOpened

    runner.runner.on(GateOpened, lambda event: event.gate.resolve(True))
    turn = await runner.begin("go")
    turn.offer([DELETE])
    call = await turn.call("d1", "delete", {}, host.centre)
    await turn.finish()
    assert call.forwarded
    assert not call.deferred
    assert len(host.runs) == 1
