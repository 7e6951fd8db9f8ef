"""A worker that dies inside a handler (the tool kills its own process, at a known point): the
re-run does not run that handler again unless the tool is declared idempotent, and a middleware
whose stash a re-run cannot rebuild fails the turn loudly instead of going on wrong."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.durable import DurableClient
from pipeline.stores import SqliteStore

from .conftest import Workers


def _crash_and_resume(workers: Workers) -> tuple[str, DurableClient]:
    client = DurableClient(workers.system_database)
    turn = client.enqueue("crash", conversation_id="boom")
    first = workers.start()
    assert workers.died(first) == -9  # crash_once killed it mid-handler
    workers.start()
    return turn, client


def test_a_handler_whose_worker_died_is_not_run_again_and_the_model_reads_why(
    workers: Workers,
) -> None:
    client = DurableClient(workers.system_database)
    try:  # an earlier turn of the conversation: the resumed turn must see it, and only it
        worker = workers.start()
        earlier = client.enqueue("go", conversation_id="boom")
        assert client.result(earlier, timeout=60)["status"] == "completed"
        turn = client.enqueue("crash", conversation_id="boom")
        assert workers.died(worker) == -9
        workers.start()
        outcome = client.result(turn, timeout=60)
    finally:
        client.close()
    assert outcome["status"] == "completed"
    assert outcome["output"] == "crash: [False, True]"
    runs = workers.handler_runs()
    assert {t: n for t, n in runs.items() if t.startswith(turn)} == {f"{turn}-0": 1, f"{turn}-1": 1}
    assert max(runs.values()) == 1
    store = SqliteStore(workers.store)
    try:
        messages, calls = asyncio.run(store.load_conversation("boom"))
    finally:
        store.close()
    assert len(calls) == 6 + 2
    assert len(messages) == len({m.id for m in messages}) == 5 + 4
    crashed = calls[-1]
    assert crashed.is_error
    assert str(crashed.results) == (
        "Error: E_DURABLE_TOOL_INTERRUPTED: tool 'crash_once' was running when its worker "
        "stopped and was not run again (whether it took effect is unknown)"
    )
    counted = outcome["stash"]["loopware"]["counter"]["total"]
    assert counted == {"completed": 1, "failed": 1}


def test_a_tool_declared_idempotent_runs_again_after_its_worker_died(workers: Workers) -> None:
    workers.write_config(runner=('rerun_interrupted = ["crash_*"]',))
    turn, client = _crash_and_resume(workers)
    try:
        outcome = client.result(turn, timeout=60)
    finally:
        client.close()
    assert outcome["output"] == "crash: [False, False]"
    assert workers.handler_runs() == {f"{turn}-0": 1, f"{turn}-1": 2}


def test_a_middleware_whose_state_a_rerun_cannot_rebuild_fails_the_turn_loudly(
    workers: Workers,
) -> None:
    workers.write_config(middleware=("stack", "chaos"))
    turn, client = _crash_and_resume(workers)
    try:
        with pytest.raises(RuntimeError, match="E_DURABLE_REPLAY_DIVERGED"):
            client.result(turn, timeout=60)
        assert client.status(turn) == "ERROR"
    finally:
        client.close()
    assert workers.handler_runs() == {f"{turn}-0": 1, f"{turn}-1": 1}  # nothing ran again
