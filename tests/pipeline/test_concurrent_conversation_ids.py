"""Concurrent turns of one conversation never give two calls one id.

Some providers number their calls per response (``call_0``). Two turns of one conversation that
run at the same time each load the conversation before the other stored anything, so only the
ids announced by running turns keep them apart. The next turn must read every call under an
id of its own, paired with the assistant message that announced it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pipeline import ToolLoopExecutor, TurnRunner, _running_ids, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore, SqliteStore, TurnStore
from pipeline.testing import ScriptedModel


@tool
async def lookup(q: str) -> str:
    """Look something up (slowly enough for two turns to overlap)."""
    await asyncio.sleep(0.01)
    return f"found {q}"


def _turn(store: TurnStore, q: str) -> TurnRunner:
    call = ProposedToolCall(id="call_0", name="lookup", arguments=json.dumps({"q": q}))
    model = ScriptedModel([ModelResponse(tool_calls=[call]), ModelResponse(text=f"done {q}")])
    return TurnRunner(executor=ToolLoopExecutor(model), tools=[lookup], store=store)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_two_concurrent_turns_reusing_a_provider_id_store_distinct_ids(
    tmp_path: Path, kind: str
) -> None:
    store: TurnStore = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "t.db")
    first, second = await asyncio.gather(
        _turn(store, "a").run("a?", conversation_id="chat"),
        _turn(store, "b").run("b?", conversation_id="chat"),
    )
    ids = [call.id for call in (*first.tool_calls, *second.tool_calls)]
    assert sorted(ids) == ["call_0", "call_0-2"]

    messages, calls = await store.load_conversation("chat")
    assert sorted(call.id for call in calls) == ["call_0", "call_0-2"]
    results = {call.id: call.results for call in calls}
    announced = [m for m in messages if m.tool_call_ids]
    assert len(announced) == 2
    # each announced id names one call, whose result answers that turn's question
    for result in (first, second):
        (call,) = result.tool_calls
        assert results[call.id] == f"found {call.args['q']}"

    later = _turn(store, "c")
    third = await later.run("c?", conversation_id="chat")
    assert [c.id for c in third.tool_calls] == ["call_0-3"]
    if isinstance(store, SqliteStore):
        store.close()


async def test_a_conversation_s_ids_are_released_when_its_last_turn_ends() -> None:
    store = MemoryStore()
    await _turn(store, "a").run("a?", conversation_id="chat")
    task = asyncio.ensure_future(_turn(store, "b").run("b?", conversation_id="other"))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert _running_ids._running == {}  # private registry: read only to check for a leak
