"""Faults: the caller cancelling a turn's task, at any moment, keeps the records whole.

A cancellation can land while a store write is on its way (the SQLite store writes in a worker
thread, which finishes the write whatever the awaiting task does). The turn must still record
what its store holds, so every call id an assistant message announced gets a stored call, and
a `TurnEnd` always follows its `TurnStart`.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.events import TurnEnd, TurnStart
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import SqliteStore
from pipeline.testing import ScriptedModel

TURNS = 300


@tool
async def slow(text: str) -> str:
    """Return the text after a short wait."""
    await asyncio.sleep(0.0005)
    return text


def _script(turn: int) -> list[ModelResponse]:
    """Three steps of two calls each, then an answer."""
    steps = [
        ModelResponse(
            tool_calls=[
                ProposedToolCall(id=f"t{turn}s{i}a", name="slow", arguments='{"text": "a"}'),
                ProposedToolCall(id=f"t{turn}s{i}b", name="slow", arguments='{"text": "b"}'),
            ]
        )
        for i in range(3)
    ]
    return [*steps, ModelResponse(text="done")]


async def _cancel_one(store: SqliteStore, turn: int, delay: float) -> tuple[list[str], list[str]]:
    """Run one turn, cancel its task after ``delay`` s; return its events and unanswered ids."""
    events: list[str] = []
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(_script(turn))), tools=[slow], store=store
    )
    runner.on(TurnStart, lambda _: events.append("start"))
    runner.on(TurnEnd, lambda _: events.append("end"))
    conversation = f"conversation-{turn}"
    task = asyncio.ensure_future(runner.run("go", conversation_id=conversation))
    await asyncio.sleep(delay)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    messages, calls = await store.load_conversation(conversation)
    stored = {call.id for call in calls}
    return events, [i for m in messages for i in m.tool_call_ids if i not in stored]


async def test_cancelled_turns_answer_every_announced_call_and_pair_their_events(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "turns.db")
    rng = random.Random(7)
    unanswered: list[str] = []
    unpaired: list[int] = []
    try:
        for turn in range(TURNS):
            events, missing = await _cancel_one(store, turn, rng.random() * 0.008)
            unanswered += missing
            if events not in ([], ["start", "end"]):
                unpaired.append(turn)
    finally:
        store.close()
    assert unanswered == []
    assert unpaired == []
