"""Faults: concurrent turns of one conversation never overwrite each other's tool calls.

With provider ids that repeat across responses (``call_0``), concurrent turns
of one conversation each store a call with the same id; the store must keep every one of them
(a call is keyed by its turn and its id, not by its conversation and its id).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import Media
from pipeline.calls import ToolCall
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import SqliteStore, TurnStore
from pipeline.stores._sqlite_schema import SCHEMA_VERSION
from pipeline.testing import ScriptedModel

TURNS = 10


@tool
async def echo(text: str) -> str:
    """Return the text after a pause (so the turns overlap)."""
    await asyncio.sleep(0.001)
    return text


def _runner(store: TurnStore, k: int) -> TurnRunner:
    """A runner whose model always names its one call ``call_0`` (as some servers do)."""
    call = ProposedToolCall(id="call_0", name="echo", arguments=json.dumps({"text": f"t{k}"}))
    model = ScriptedModel([ModelResponse(tool_calls=[call]), ModelResponse(text=f"done {k}")])
    return TurnRunner(executor=ToolLoopExecutor(model), tools=[echo], store=store)


async def test_concurrent_turns_with_repeating_provider_ids_keep_every_call(
    store: TurnStore,
) -> None:
    """Ten concurrent turns of one conversation, each storing ``call_0``: ten calls are kept."""
    results = await asyncio.gather(
        *(_runner(store, k).run(f"u{k}", conversation_id="c") for k in range(TURNS))
    )
    assert all(r.status == "completed" for r in results)
    _, calls = await store.load_conversation("c")
    assert len(calls) == TURNS, f"the store kept {len(calls)} of {TURNS} calls"
    assert sorted(str(c.results) for c in calls) == sorted(f"t{k}" for k in range(TURNS))


async def test_a_later_turn_still_gets_a_fresh_id_for_a_repeated_provider_id(
    store: TurnStore,
) -> None:
    """Sequential turns see the history: a repeated ``call_0`` is stored under a new id."""
    for k in range(3):
        await _runner(store, k).run(f"u{k}", conversation_id="c")
    _, calls = await store.load_conversation("c")
    assert [c.id for c in calls] == ["call_0", "call_0-2", "call_0-3"]


async def test_same_id_in_two_turns_of_a_conversation_are_kept_apart(store: TurnStore) -> None:
    """Saving, replacing and deleting a call touch only the turn that stored it."""
    first = ToolCall.completed(id="x", tool="t", args={}, results="one")
    second = ToolCall.completed(id="x", tool="t", args={}, results="two")
    await store.save_tool_call("c", "t1", first)
    await store.save_tool_call("c", "t2", second)
    await store.save_tool_call(
        "c", "t1", ToolCall.completed(id="x", tool="t", args={}, results="1")
    )
    _, calls = await store.load_conversation("c")
    assert [c.results for c in calls] == ["1", "two"]
    assert await store.delete_tool_call("c", "t2", "x") is True
    _, calls = await store.load_conversation("c")
    assert [c.results for c in calls] == ["1"]


_V1_TOOL_CALLS = """CREATE TABLE tool_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL, conversation_id TEXT, turn_id TEXT NOT NULL,
    id TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL,
    checksum TEXT NOT NULL, is_complete INTEGER NOT NULL, is_error INTEGER NOT NULL,
    from_artifact_tool INTEGER NOT NULL, inline INTEGER NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, completed_at TEXT,
    results_kind TEXT NOT NULL, results_text TEXT,
    UNIQUE (scope, id)
)"""
"""The version-1 ``tool_calls`` table (calls unique per conversation and id)."""


def _rewind_to_version_1(path: Path) -> None:
    """Rebuild ``tool_calls`` as version 1 had it, rows and ``seq`` kept (foreign keys off)."""
    with sqlite3.connect(path) as conn:
        conn.execute(_V1_TOOL_CALLS.replace("tool_calls", "tool_calls_v1", 1))
        columns = ", ".join(
            row[1] for row in conn.execute("PRAGMA table_info(tool_calls_v1)").fetchall()
        )
        conn.execute(f"INSERT INTO tool_calls_v1 SELECT {columns} FROM tool_calls")
        conn.execute("DROP TABLE tool_calls")
        conn.execute("ALTER TABLE tool_calls_v1 RENAME TO tool_calls")
        conn.execute("CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id)")
        conn.execute("ALTER TABLE tool_call_results DROP COLUMN spool_key")
        conn.execute("ALTER TABLE messages DROP COLUMN provider_state")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
        conn.execute("DROP TABLE counter_slots")  # version 6's
        conn.execute("DROP TABLE conversations")  # version 8's
        conn.execute("DROP TABLE conversation_counts")
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'tool_calls'").fetchone()
        assert "UNIQUE (scope, id)" in sql[0]
    conn.close()


async def test_a_version_1_database_is_migrated_and_keeps_its_calls(tmp_path: Path) -> None:
    """A database from before calls were keyed by turn opens migrated, losing nothing.

    Its calls (results parts included) load back the same and in order, new calls follow
    them, a repeated id in another turn is kept, and deleting a migrated call still deletes
    its parts.
    """
    path = tmp_path / "v1.db"
    media = Media.tool_generated("image", "image/png", "a.png", b"png", source="https://x.test")
    old_calls = [
        ToolCall.completed(id="a", tool="t", args={"n": 1}, results="one"),
        ToolCall.completed(id="b", tool="t", args={}, results=[media]),
    ]
    async with SqliteStore(path) as store:
        for call in old_calls:
            await store.save_tool_call("c", "t1", call)
    _rewind_to_version_1(path)
    async with SqliteStore(path) as store:
        _, calls = await store.load_conversation("c")
        assert [(c.id, c.results) for c in calls] == [(c.id, c.results) for c in old_calls]
        again = ToolCall.completed(id="a", tool="t", args={}, results="other turn")
        await store.save_tool_call("c", "t2", again)
        _, calls = await store.load_conversation("c")
        assert [(c.id, c.results) for c in calls][-1] == ("a", "other turn")
        assert len(calls) == 3
        assert await store.delete_tool_call("c", "t1", "b") is True
    with sqlite3.connect(path) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_migrations")]
        parts = conn.execute("SELECT COUNT(*) FROM tool_call_results").fetchone()[0]
    conn.close()
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    assert parts == 0
