"""A store write that fails once: the call keeps its one record and its one audit row.

The audit keeps a call's row before (or beside) the store's write. When that write fails, the
turn fails and answers the calls it announced; the call whose record was built is stored again
as it was (its tool, that it ran), and the audit does not write a second row for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel

paid: list[str] = []


@tool
def pay(q: str) -> str:
    """Pay once."""
    paid.append(q)
    return "paid"


class FailsOnce(MemoryStore):
    """A store whose first call write fails (a transient disk or network error)."""

    def __init__(self, durable: bool) -> None:
        super().__init__()
        self.failed = False
        self.durable = durable  # type: ignore[misc]  # the class says False; this one decides

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        if not self.failed:
            self.failed = True
            raise OSError("disk hiccup")
        await super().save_tool_call(conversation_id, turn_id, call)


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "not-durable"])
async def test_a_call_whose_store_write_failed_keeps_one_record_and_one_row(
    tmp_path: Path, durable: bool
) -> None:
    paid.clear()
    sink = SqliteAuditSink(tmp_path / "audit.db")
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ProposedToolCall(id="c1", name="pay", arguments='{"q": "x"}')]
            ),
            ModelResponse(text="done"),
        ]
    )
    store = FailsOnce(durable)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[pay], store=store, middleware=[AuditLog(sink)]
    )
    try:
        result = await runner.run("go", conversation_id="chat")
        rows: list[Any] = [r.entry for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sink.verify()
    finally:
        sink.close()
    assert result.status == "failed"
    assert paid == ["x"]
    (call,) = result.tool_calls
    assert (call.id, call.tool, call.verdict, call.ran) == ("c1", "pay", "allowed", True)
    _, stored = await store.load_conversation("chat")
    assert [(c.id, c.tool, c.ran) for c in stored] == [("c1", "pay", True)]
    assert [(e.call_id, e.tool, e.decision, e.ran) for e in rows] == [
        ("c1", "pay", "allowed", True)
    ]
