"""The MCP gateway's approvals without processes: the webhook body read, the approvals held,
answered row first (a row that cannot be written rejects), and an expired one answered never."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import pytest

from loopware_cli._console_data import hook_view, waited_text
from loopware_cli._console_hooks import (
    HookApproval,
    HookApprovals,
    HookRequestError,
    parse_hook_request,
)
from loopware_cli._console_sources import (
    AnswerNotRecordedError,
    ConsoleSources,
    GateAnswer,
    HookNotWaitingError,
)
from middleware.audit import SqliteAuditSink

from .test_console_data import _BrokenSink

BODY = {
    "tool": "fx_echo",
    "call_id": "call_1",
    "args": {"text": "<b>hi</b>", "times": 1},
    "reason": "the call to 'fx_echo' needs approval",
    "gate": "loopware.approval:fx_echo:call_1:ab12",
    "principal": "stdio",
    "conversation": "stdio",
    "turn_id": "turn_1",
    "timeout": 120,
}


def test_the_gateways_body_reads_as_an_approval_and_its_view_keeps_the_text() -> None:
    approval = parse_hook_request(json.dumps(BODY).encode())
    assert (approval.tool, approval.call_id, approval.principal) == ("fx_echo", "call_1", "stdio")
    assert (approval.turn_id, approval.timeout) == ("turn_1", 120.0)
    old = {k: BODY[k] for k in ("tool", "call_id", "args", "reason")}  # an older gateway's body
    assert parse_hook_request(json.dumps(old).encode()).principal is None
    view = hook_view(approval)
    assert view.args == '{\n  "text": "<b>hi</b>",\n  "times": 1\n}'
    assert [waited_text(s) for s in (0.4, 42, 185, 7260)] == [
        "0 s",
        "42 s",
        "3 min 5 s",
        "2 h 1 min",
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"\xff",
        b"null",
        b'"text"',
        json.dumps({**BODY, "tool": 3}).encode(),
        json.dumps({**BODY, "call_id": ""}).encode(),
        json.dumps({**BODY, "args": "rm -rf /"}).encode(),
        json.dumps({k: v for k, v in BODY.items() if k != "reason"}).encode(),
        json.dumps({**BODY, "principal": ["x"]}).encode(),
        json.dumps({**BODY, "timeout": -1}).encode(),
        json.dumps({**BODY, "timeout": True}).encode(),
    ],
)
def test_a_malformed_body_is_refused(body: bytes) -> None:
    with pytest.raises(HookRequestError):
        parse_hook_request(body)


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _held(hooks: HookApprovals, approval: HookApproval) -> asyncio.Task[Any]:
    waiting = asyncio.ensure_future(hooks.wait(approval, cast(Any, _never)))
    await asyncio.sleep(0)
    assert hooks.pending() == [approval]
    return waiting


async def test_an_answer_writes_its_row_before_the_gateway_hears_it(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "audit.sqlite")
    sources = ConsoleSources(sink=sink, answerer="alice")
    hooks = HookApprovals()
    approval = parse_hook_request(json.dumps(BODY).encode())
    try:
        waiting = await _held(hooks, approval)
        answer = GateAnswer(gate_id=approval.hook_id, approve=False, reason=" not now ")
        row = await sources.answer_hook(hooks, answer)
        verdict = await waiting
        assert (verdict.approved, verdict.reason) == (False, "not now")
        e = row.entry
        assert (e.kind, e.decision, e.policy, e.reason) == (
            "answer",
            "rejected",
            "console:alice",
            "not now",
        )
        assert (e.turn_id, e.conversation_id, e.call_id, e.checksum) == (
            "turn_1",
            "stdio",
            "call_1",
            BODY["gate"],
        )
        assert hooks.pending() == []
        with pytest.raises(HookNotWaitingError):  # answered once only
            await sources.answer_hook(hooks, answer)
        assert len(sink.rows()) == 1
    finally:
        sources.close()


async def test_a_row_that_cannot_be_written_rejects_the_call(tmp_path: Path) -> None:
    broken = _BrokenSink(SqliteAuditSink(tmp_path / "audit.sqlite"))
    sources = ConsoleSources(sink=cast(Any, broken), answerer="alice")
    hooks = HookApprovals()
    approval = parse_hook_request(json.dumps(BODY).encode())
    try:
        waiting = await _held(hooks, approval)
        answer = GateAnswer(gate_id=approval.hook_id, approve=True, reason="")
        with pytest.raises(AnswerNotRecordedError, match="was rejected"):
            await sources.answer_hook(hooks, answer)
        assert (await waiting).approved is False
    finally:
        sources.close()


async def test_past_the_gateways_timeout_the_approval_expires_and_an_answer_changes_nothing(
    tmp_path: Path,
) -> None:
    sink = SqliteAuditSink(tmp_path / "audit.sqlite")
    sources = ConsoleSources(sink=sink, answerer="alice")
    hooks = HookApprovals()
    approval = parse_hook_request(json.dumps({**BODY, "timeout": 1.2}).encode())
    try:
        waiting = await _held(hooks, approval)
        assert await asyncio.wait_for(waiting, 5) is None  # expired (timeout less the margin)
        assert hooks.pending() == []
        assert [a.hook_id for a, _ in hooks.expired()] == [approval.hook_id]
        answer = GateAnswer(gate_id=approval.hook_id, approve=True, reason="")
        with pytest.raises(HookNotWaitingError, match="expired"):
            await sources.answer_hook(hooks, answer)
        assert sink.rows() == []
    finally:
        sources.close()
