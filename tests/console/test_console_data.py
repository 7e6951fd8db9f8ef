"""The console's data layer without a browser: audit rows, stored calls and gates into views."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from loopware_cli._console_data import (
    PREVIEW_CHARS,
    answers_of,
    calls_of,
    chain_view,
    gate_views,
    result_preview,
    turns_of,
    usage_text,
)
from loopware_cli._console_sources import AnswerNotRecordedError, ConsoleSources, GateAnswer
from loopware_cli._console_views import Filters
from middleware.audit import AuditEntry, SqliteAuditSink
from pipeline.durable import GateNotWaitingError, WaitingGate
from pipeline.stores import SqliteStore

from ._turns import CONVERSATION, HOSTILE, MADE_UP_TOOL, hostile_turn


async def test_a_turn_reads_as_its_calls_in_order_with_verdicts_decisions_and_raw_text(
    tmp_path: Path,
) -> None:
    audit, _, turn_id = await hostile_turn(tmp_path)
    sink = SqliteAuditSink(audit)
    try:
        rows = sink.rows()
    finally:
        sink.close()
    (turn,) = turns_of(rows)
    assert (turn.turn_id, turn.conversation_id, turn.status) == (turn_id, CONVERSATION, "completed")
    assert turn.input == f"please {HOSTILE}"
    assert turn.duration_ms is not None
    assert [(c.call_id, c.tool, c.verdict, c.ran) for c in turn.calls] == [
        ("c1", "echo", "allowed", True),
        ("c2", "shell_run", "denied", False),
        ("c3", MADE_UP_TOOL, "invalid", False),
    ]
    echo, shell, _ = turn.calls
    # kept as text: escaping is the template's job, done once
    assert echo.args == json.dumps({"text": HOSTILE}, indent=2, ensure_ascii=False)
    assert echo.decisions == ()
    assert [(d.action, d.policy, d.when) for d in shell.decisions] == [
        ("denied", "loopware.policy", "before")
    ]
    assert echo.result is None  # the chain keeps no results: the store adds them


async def test_a_stored_result_previews_as_text_cut_at_the_preview_size(tmp_path: Path) -> None:
    _, store_path, turn_id = await hostile_turn(tmp_path)
    async with SqliteStore(store_path) as store:
        calls = {c.id: c for c in await store.tool_calls_for_turn(turn_id)}
    assert result_preview(calls["c1"]) == f"echo: {HOSTILE}"
    long = dataclasses.replace(calls["c1"], results="x" * (PREVIEW_CHARS + 5))
    assert result_preview(long) == "x" * PREVIEW_CHARS + "…"


async def test_filters_keep_turns_by_conversation_tool_and_decision_and_name_them_in_a_query(
    tmp_path: Path,
) -> None:
    audit, _, _ = await hostile_turn(tmp_path)
    sink = SqliteAuditSink(audit)
    try:
        rows = sink.rows()
    finally:
        sink.close()
    (turn,) = turns_of(rows)
    assert Filters.from_query({"conversation": CONVERSATION}).keeps_turn(turn)
    assert not Filters.from_query({"conversation": "other"}).keeps_turn(turn)
    assert Filters(tool="shell_run", decision="denied").keeps_turn(turn)
    assert not Filters(tool="echo", decision="denied").keeps_turn(turn)
    assert [c.call_id for c in calls_of(rows) if Filters(decision="invalid").keeps_call(c)] == [
        "c3"
    ]
    assert Filters(conversation=CONVERSATION, tool="echo").query() == (
        "conversation=javascript%3Awindow.__pwned%3D4&tool=echo"
    )
    assert Filters().query() == ""
    assert not Filters().active


async def test_an_edited_row_makes_the_chain_view_name_the_first_bad_row(tmp_path: Path) -> None:
    audit, _, _ = await hostile_turn(tmp_path)
    with sqlite3.connect(audit) as conn:
        conn.execute("UPDATE audit_rows SET decision = 'allowed' WHERE idx = 2")
    conn.close()
    sink = SqliteAuditSink(audit)
    try:
        view = chain_view(sink.verify())
    finally:
        sink.close()
    assert (view.ok, view.first_bad_row, view.reason) == (False, 2, "E_AUDIT_ROW_EDITED")
    assert "row 2" in view.text


def test_a_waiting_gate_shows_the_validated_arguments_its_handler_will_receive() -> None:
    gate = WaitingGate(
        gate_id="turn_1:gate-2",
        reason="the call to 'refund' needs approval",
        payload={"tool": "refund", "call_id": "c9", "args": {"order": "A1", "amount": 5}},
    )
    other = WaitingGate(gate_id="turn_2:gate-1", reason="ask a human", payload=["free", "form"])
    refund, free = gate_views([gate, other])
    assert (refund.turn_id, refund.tool, refund.call_id) == ("turn_1", "refund", "c9")
    assert refund.args == '{\n  "amount": 5,\n  "order": "A1"\n}'
    assert (free.turn_id, free.tool, free.args) == ("turn_2", None, '[\n  "free",\n  "form"\n]')


async def test_answer_rows_read_back_with_who_answered_latest_first(tmp_path: Path) -> None:
    sink = SqliteAuditSink(tmp_path / "audit.sqlite")
    now = datetime.now(UTC)
    try:
        await sink.append(
            [
                AuditEntry(
                    kind="answer", turn_id="t1", conversation_id=None, recorded_at=now,
                    tool="refund", checksum="t1:gate-1", decision="rejected",
                    policy="console:alice", reason="no receipt",
                ),
                AuditEntry(
                    kind="answer", turn_id="t2", conversation_id=None, recorded_at=now,
                    tool="refund", checksum="t2:gate-1", decision="approved",
                    policy="console:bob",
                ),
            ]
        )
        assert sink.verify()
        rows = sink.rows()
    finally:
        sink.close()
    assert [(a.gate_id, a.decision, a.who, a.reason) for a in answers_of(rows)] == [
        ("t2:gate-1", "approved", "console:bob", None),
        ("t1:gate-1", "rejected", "console:alice", "no receipt"),
    ]
    assert turns_of(rows) == []  # answer rows are no calls
    assert [t.status for t in turns_of(rows, waiting=["t3"])] == ["waiting"]


async def test_without_a_durable_database_an_answer_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    sink = SqliteAuditSink(tmp_path / "audit.sqlite")
    sources = ConsoleSources(sink=sink)
    try:
        with pytest.raises(GateNotWaitingError):
            await sources.answer(GateAnswer(gate_id="t1:gate-1", approve=True, reason=""))
        assert await sources.waiting() == []
        assert await sources.rows() == []
    finally:
        sources.close()


@pytest.mark.parametrize(
    ("stash", "text"),
    [
        ({"loopware": {"usage": {"input_tokens": 32, "output_tokens": 10, "calls": 2}}},
         "32 in, 10 out (2 model calls)"),
        ({"loopware.usage": {"input_tokens": 1, "output_tokens": 2}}, "1 in, 2 out"),
        ({}, None),
    ],
    ids=["nested", "dotted", "none"],
)
def test_a_durable_turns_usage_reads_from_its_final_stash(
    stash: dict[str, object], text: str | None
) -> None:
    assert usage_text(stash) == text


class _Client:
    """A durable client double: one waiting gate, and the settle calls it received."""

    def __init__(self) -> None:
        self.settled: list[tuple[str, bool, str | None]] = []
        self.gates = [
            WaitingGate(
                gate_id="turn_7:gate-1",
                reason="the call to 'refund' needs approval",
                payload={"tool": "refund", "call_id": "c1", "args": {"order": "A1"}},
            )
        ]

    def waiting_gates(self) -> list[WaitingGate]:
        return list(self.gates)

    def settle(self, gate_id: str, *, approve: bool, reason: str | None) -> None:
        self.settled.append((gate_id, approve, reason))
        self.gates = [g for g in self.gates if g["gate_id"] != gate_id]

    def close(self) -> None:
        pass


class _BrokenSink:
    """An audit sink whose appends fail (a full disk, a lost database)."""

    def __init__(self, inner: SqliteAuditSink) -> None:
        self.inner = inner

    def append(self, entries: object) -> Any:
        raise OSError("disk full")

    def rows(self) -> list[Any]:
        return self.inner.rows()

    def close(self) -> None:
        self.inner.close()


async def test_a_rejection_settles_the_gate_with_who_and_why_then_appends_its_answer_row(
    tmp_path: Path,
) -> None:
    client = _Client()
    sink = SqliteAuditSink(tmp_path / "audit.sqlite")
    sources = ConsoleSources(sink=sink, client=cast(Any, client), answerer="alice")
    try:
        no = GateAnswer(gate_id="turn_7:gate-1", approve=False, reason=" no ")
        row = await sources.answer(no)
        with pytest.raises(GateNotWaitingError):  # answered: a second answer changes nothing
            await sources.answer(GateAnswer(gate_id="turn_7:gate-1", approve=True, reason=""))
        rows = await sources.rows()
    finally:
        sources.close()
    assert client.settled == [("turn_7:gate-1", False, "rejected by console:alice: no")]
    e = row.entry
    assert (e.kind, e.turn_id, e.call_id, e.tool, e.args) == (
        "answer", "turn_7", "c1", "refund", '{"order":"A1"}'
    )
    assert (e.decision, e.policy, e.reason, e.checksum) == (
        "rejected", "console:alice", "no", "turn_7:gate-1"
    )
    assert [r.entry for r in rows] == [e]


async def test_an_answer_whose_audit_row_cannot_be_written_says_so(tmp_path: Path) -> None:
    client = _Client()
    broken = _BrokenSink(SqliteAuditSink(tmp_path / "audit.sqlite"))
    sources = ConsoleSources(sink=cast(Any, broken), client=cast(Any, client))
    try:
        with pytest.raises(AnswerNotRecordedError, match="was answered, but its audit row"):
            await sources.answer(GateAnswer(gate_id="turn_7:gate-1", approve=True, reason=""))
    finally:
        sources.close()
    assert client.settled == [("turn_7:gate-1", True, None)]
