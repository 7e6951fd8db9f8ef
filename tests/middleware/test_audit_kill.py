"""No stored call without its audit row, whenever the process is killed (SIGKILL).

A child process runs turns without end (three at a time, several calls per iteration: calls that
run, calls a policy refuses, calls to unknown tools, a limit hiding a tool) with a `SqliteStore`
and an `AuditLog` over a `SqliteAuditSink`, on one file or on two, and is killed with SIGKILL at
a random moment; again and again, on the same files. Afterwards every call the store holds has
exactly one ``tool_call`` row, and the chain verifies.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from middleware.audit import SqliteAuditSink
from pipeline.calls import ToolCall
from pipeline.stores import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
KILLS = 25
"""Kills per layout."""

_CHILD = '''
import asyncio, json, sys
from middleware import ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import SqliteStore
from pipeline import tool

store_path, audit_path, sink_sync, tag = sys.argv[1:5]


@tool
async def search(q: str) -> str:
    """Search (a little I/O)."""
    await asyncio.sleep(0.001)
    return "found " + q


@tool
def shell_exec(cmd: str) -> str:
    """Never allowed."""
    raise AssertionError("denied")


class Model:
    """Four iterations of three calls each, then an answer."""

    async def complete(self, request):
        done = len(request.tool_calls)
        if done >= 12:
            return ModelResponse(text="done")
        key, i = request.messages[0].content, done // 3
        await asyncio.sleep(0.002)
        return ModelResponse(tool_calls=[
            ProposedToolCall(id=f"{key}-{i}-a", name="search", arguments=json.dumps({"q": key})),
            ProposedToolCall(id=f"{key}-{i}-b", name="shell_exec" if i % 2 else "search",
                             arguments='{"cmd": "ls"}' if i % 2 else '{"q": 7}'),
            ProposedToolCall(id=f"{key}-{i}-c", name="nope" if i % 2 else "search",
                             arguments="{}" if i % 2 else '{"q": "\\\\ud800"}'),
        ])


async def main():
    sink = SqliteAuditSink(audit_path, synchronous=sink_sync)
    store = SqliteStore(store_path, synchronous="normal")
    runner = TurnRunner(
        executor=ToolLoopExecutor(Model()),
        tools=[search, shell_exec],
        middleware=[AuditLog(sink), ToolPolicy(deny=["shell*"]), ToolCallLimit({"search": 5})],
        store=store,
    )
    print("ready", flush=True)
    n = 0
    while True:
        await asyncio.gather(*(
            runner.run(f"{tag}.{n}.{k}", conversation_id=f"{tag}.{n}.{k}") for k in range(3)
        ))
        n += 1


asyncio.run(main())
'''


def stored_calls(store: Path) -> set[tuple[str, str]]:
    """(turn id, call id) of every call the store holds."""
    with sqlite3.connect(store) as conn:
        found = {(str(t), str(c)) for t, c in conn.execute("SELECT turn_id, id FROM tool_calls")}
    conn.close()
    return found


def audited_calls(audit: Path) -> tuple[Counter[tuple[str, str]], set[str], set[str]]:
    """Per (turn id, call id) its ``tool_call`` rows; the turns with a call row; the turns
    with a turn row. Fails unless the chain verifies."""
    sink = SqliteAuditSink(audit, synchronous="normal")
    try:
        assert sink.verify()
        entries = [row.entry for row in sink.rows()]
    finally:
        sink.close()
    calls = Counter((e.turn_id, str(e.call_id)) for e in entries if e.kind == "tool_call")
    return calls, {t for t, _ in calls}, {e.turn_id for e in entries if e.kind == "turn"}


def calls_without_rows(store: Path, audit: Path) -> set[tuple[str, str]]:
    """The stored calls that have no audit row (what must always be empty)."""
    calls, _, _ = audited_calls(audit)
    return stored_calls(store) - set(calls)


def test_the_check_finds_a_stored_call_without_its_row(tmp_path: Path) -> None:
    """The check is not vacuous: a call stored with no AuditLog is reported."""
    store_path, audit = tmp_path / "store.sqlite", tmp_path / "audit.sqlite"
    SqliteAuditSink(audit).close()
    store = SqliteStore(store_path)
    try:
        call = ToolCall.completed(id="lost", tool="search", args={}, results="r")
        asyncio.run(store.save_tool_call(None, "t1", call))
    finally:
        store.close()
    assert calls_without_rows(store_path, audit) == {("t1", "lost")}


@pytest.mark.parametrize(
    ("layout", "sink_sync"),
    [("one-file", "normal"), ("two-files", "normal"), ("two-files", "full")],
    ids=["one-file", "two-files", "two-files-full-sink"],
)
def test_no_stored_call_is_ever_without_its_row_whenever_a_kill_lands(
    tmp_path: Path, layout: str, sink_sync: str
) -> None:
    """25 SIGKILLs at random moments of a process running turns: 0 stored calls without their
    row, no call with two, the chain verifies; the kills did land in the middle of turns."""
    rng = random.Random(f"{layout}-{sink_sync}")
    store = tmp_path / "loopware.sqlite"
    audit = store if layout == "one-file" else tmp_path / "audit.sqlite"
    script = tmp_path / "child.py"
    script.write_text(_CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for k in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, str(script), str(store), str(audit), sink_sync, f"k{k}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        assert child.stdout is not None
        ready = child.stdout.readline()
        time.sleep(rng.uniform(0.02, 0.3))
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=30)
        assert ready == b"ready\n", err.decode(errors="replace")
        assert child.returncode == -signal.SIGKILL, err.decode(errors="replace")
    calls, turns_with_calls, ended = audited_calls(audit)
    stored = stored_calls(store)
    assert len(stored) > KILLS * 10
    assert stored - set(calls) == set()  # no stored call without its row
    assert max(calls.values()) == 1  # and none with two
    assert len(turns_with_calls - ended) >= KILLS // 2  # kills that landed mid-turn
