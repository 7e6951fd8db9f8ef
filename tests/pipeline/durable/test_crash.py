"""Workers killed with SIGKILL at random points mid-turn: another worker finishes every turn.

Each trial starts a worker on a shared SQLite system database, lets it run queued turns for a
random moment, and kills it; a final worker finishes what is left. The counting tool's log,
the store and the audit chain then show that no handler ran twice for one call id, every turn's
records are complete and unduplicated, the middleware state is what an uninterrupted turn
ends with, and the chain verifies.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

from middleware.audit import SqliteAuditSink
from pipeline.durable import DurableClient
from pipeline.stores import SqliteStore

from .app import CALLS_PER_TURN, RESPONSES, text_of
from .conftest import Workers

KILLS = 20
"""Kills that must land while a turn is unfinished."""


def test_turns_killed_mid_way_finish_on_another_worker_with_each_handler_run_at_most_once(
    workers: Workers,
) -> None:
    rng = random.Random(20261123)
    client = DurableClient(workers.system_database)
    turns: dict[str, str] = {}

    def enqueue(n: int) -> None:
        for _ in range(n):
            conversation = f"conv-{len(turns)}"
            turns[client.enqueue("go", conversation_id=conversation)] = conversation

    try:
        enqueue(16)
        mid_turn = 0
        trials = 0
        while mid_turn < KILLS:
            trials += 1
            assert trials < 3 * KILLS, f"only {mid_turn} kills landed mid-turn"
            if all(s == "SUCCESS" for s in client.statuses(list(turns)).values()):
                enqueue(8)
            worker = workers.start()
            time.sleep(rng.uniform(0.05, 0.5))
            workers.kill(worker)
            if "PENDING" in client.statuses(list(turns)).values():
                mid_turn += 1
        final = workers.start()
        outcomes = {t: client.result(t, timeout=120) for t in turns}
        workers.stop(final)
    finally:
        client.close()

    runs = workers.handler_runs()
    assert runs
    assert max(runs.values()) == 1, [t for t, n in runs.items() if n > 1]

    store = SqliteStore(workers.store)
    sink = SqliteAuditSink(workers.audit)
    try:
        interrupted = 0
        for turn_id, conversation in turns.items():
            outcome = outcomes[turn_id]
            assert outcome["status"] == "completed", outcome
            assert outcome["output"] == f"done after {CALLS_PER_TURN} calls"
            messages, calls = asyncio.run(store.load_conversation(conversation))
            assert [c.id for c in calls] == [f"{turn_id}-{i}" for i in range(CALLS_PER_TURN)]
            assert [m.role for m in messages] == ["user"] + ["assistant"] * (RESPONSES + 1)
            assert len({m.id for m in messages}) == len(messages)
            for call in calls:
                if call.is_error:  # its worker died while the handler ran: not run again
                    assert "E_DURABLE_TOOL_INTERRUPTED" in str(call.results)
                    assert runs.get(call.id, 0) <= 1
                    interrupted += 1
                else:
                    assert text_of(call.results) == f"recorded {call.id}"
                    assert runs[call.id] == 1
            stash = outcome["stash"]["loopware"]
            counted = stash["counter"]["total"]
            assert counted["completed"] + counted["failed"] == CALLS_PER_TURN
            assert counted["failed"] == sum(c.is_error for c in calls)
            assert stash["usage"]["calls"] == RESPONSES + 1
            # every call ran (an interrupted one in the worker that died): each used a slot
            assert stash["limit"]["total"] == sum(c.ran for c in calls) == CALLS_PER_TURN
        assert interrupted < len(turns) * CALLS_PER_TURN
        assert sink.verify()
        rows = sink.rows()
        audited: dict[str, set[tuple[bool, str | None, bool | None]]] = {}
        for row in rows:
            e, cid = row.entry, row.entry.call_id
            if e.kind == "tool_call" and cid is not None:
                audited.setdefault(cid, set()).add((e.is_error, e.decision, e.ran))
        for turn_id, conversation in turns.items():
            _, calls = asyncio.run(store.load_conversation(conversation))
            # every stored call has its row, saying what its record says (a re-run that
            # stores a call again writes the same row again)
            assert {c.id: {(c.is_error, c.verdict, c.ran)} for c in calls} == {
                cid: seen for cid, seen in audited.items() if cid.startswith(f"{turn_id}-")
            }
        ended = Counter(r.entry.turn_id for r in rows if r.entry.kind == "turn")
        assert set(ended) == set(turns)
    finally:
        sink.close()
        store.close()
