"""Faults: a proposed call's name or id that no tool could have never ends the turn.

A model can send a name of 65 or more characters, a dotted or spaced name, a lone surrogate in
the name or the call id, or no name at all (``None`` from a provider's ``null``). Each such call
gets an error record the model reads; the turn completes, its sibling call runs once, the
per-tool counts stay valid stash paths, and both audit sinks write one row per call id with a
chain that verifies. Under the sequential and the parallel executor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from middleware import ToolCallCounter
from middleware.audit import AuditLog, JsonlAuditSink, SqliteAuditSink
from pipeline import StashKey, ToolLoopExecutor, TurnRunner, is_tool_name, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

PARALLEL = pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])

BAD_CALLS: list[tuple[str, Any, str]] = [
    ("long-name", "x" * 65, "c1"),
    ("very-long-name", "n" * 10_000, "c1"),
    ("dotted-name", "loopware.counter.total", "c1"),
    ("spaced-name", "rm -rf", "c1"),
    ("surrogate-in-name", "ec\ud800ho", "c1"),
    ("surrogate-in-id", "echo", "c\udc00"),
    ("no-name", None, "c1"),
    ("empty-name", "", "c1"),
    ("number-name", 5, "c1"),
]


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    ran.append(text)
    return text


ran: list[str] = []


@PARALLEL
@pytest.mark.parametrize(
    ("name", "call_id"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
async def test_a_call_no_tool_could_answer_gets_a_record_and_the_turn_goes_on(
    tmp_path: Path, parallel: bool, name: Any, call_id: str
) -> None:
    ran.clear()
    bad = ProposedToolCall(id=call_id, name=name, arguments="{}")
    good = ProposedToolCall(id="ok", name="echo", arguments=json.dumps({"text": "hi"}))
    model = ScriptedModel([ModelResponse(tool_calls=[bad, good]), ModelResponse(text="done")])
    sqlite = SqliteAuditSink(tmp_path / "audit.db")
    jsonl = JsonlAuditSink(tmp_path / "audit.jsonl")
    runner = TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel),
        tools=[echo],
        middleware=[ToolCallCounter(), AuditLog(sqlite), AuditLog(jsonl)],
    )

    try:
        await _play_and_check(runner, name, call_id, sqlite, jsonl)
    finally:
        sqlite.close()
        jsonl.close()


async def _play_and_check(
    runner: TurnRunner, name: Any, call_id: str, *sinks: SqliteAuditSink | JsonlAuditSink
) -> None:
    result = await runner.run("go")

    assert result.status == "completed", result.errors
    assert not result.errors
    assert ran == ["hi"]  # the sibling ran, once
    calls = {c.id: c for c in result.tool_calls}
    assert set(calls) == {call_id, "ok"}
    refused = calls[call_id]
    assert refused.is_error
    assert not refused.ran
    if name != "echo":
        assert refused.verdict == "invalid"
        assert "E_TOOL_NOT_FOUND" in str(refused.results)
    stash = result.stash
    assert stash[StashKey[int]("loopware.counter.total.failed")] == 1
    assert stash[StashKey[int]("loopware.counter.total.completed")] == 1
    if not is_tool_name(name):
        assert stash[StashKey[int]("loopware.counter.by_tool.(invalid name).failed")] == 1
    for sink in sinks:
        rows = [r.entry for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sorted(e.call_id or "" for e in rows) == sorted([call_id, "ok"])
        assert sink.verify()


async def test_a_call_without_a_name_reads_that_it_names_no_tool() -> None:
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ProposedToolCall(id="c1", name=None, arguments=None)]),  # type: ignore[arg-type]
            ModelResponse(text="done"),
        ]
    )
    result = await TurnRunner(executor=ToolLoopExecutor(model), tools=[echo]).run("go")
    (call,) = result.tool_calls
    assert call.tool == "(unnamed)"
    assert call.results == "Error: E_TOOL_NOT_FOUND: the call names no tool; available tools: echo"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("echo", True),
        ("a-b_C9", True),
        ("x" * 64, True),
        ("x" * 65, False),
        ("a.b", False),
        ("", False),
        ("a b", False),
        ("\u0455earch", False),
        (None, False),
        (5, False),
    ],
    ids=repr,
)
def test_is_tool_name_accepts_exactly_the_names_a_tool_may_have(
    name: object, expected: bool
) -> None:
    assert is_tool_name(name) is expected
