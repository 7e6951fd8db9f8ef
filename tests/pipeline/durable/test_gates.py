"""Durable gate waits: an approval outlives the worker, comes from ``loopware approve``, and the
turn finishes on a new worker; a rejection reaches the model; bad gate ids are refused."""

from __future__ import annotations

import asyncio

from middleware.audit import SqliteAuditSink
from pipeline.durable import DurableClient
from pipeline.stores import SqliteStore

from .conftest import Workers


def _gate_id(line: str) -> str:
    return line.split()[2]


def test_a_gate_outlives_its_worker_and_an_approval_from_the_cli_finishes_the_turn(
    workers: Workers,
) -> None:
    client = DurableClient(workers.system_database)
    try:
        turn = client.enqueue("refund A1", conversation_id="shop")
        first = workers.start()
        started = workers.read_until(first, "turn started:")
        assert started.startswith(f"turn started: {turn} conversation=shop queued=")
        gate_id = _gate_id(workers.read_until(first, "gate waiting:"))
        assert gate_id == f"{turn}:gate-1"
        workers.stop(first)
        assert client.status(turn) == "PENDING"
        assert "refund A1" not in workers.handler_runs()  # the handler waits for the approval

        listed = workers.cli("approve", "--config", str(workers.config), "--list")
        assert listed.returncode == 0
        assert gate_id in listed.stdout
        assert '"order": "A1"' in listed.stdout
        approved = workers.cli("approve", "--config", str(workers.config), gate_id)
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.strip() == f"approved {gate_id}"

        second = workers.start()
        outcome = client.result(turn, timeout=60)
        lines = workers.stop(second).splitlines()
    finally:
        client.close()
    assert outcome["status"] == "completed"
    assert outcome["output"] == "refund: refunded A1"
    # the second worker re-runs the turn past the gate approved meanwhile: it logs the turn
    # and announces no gate
    turn_lines = [line for line in lines if line.startswith("turn ")]
    assert [line.split(" queued=")[0].split(" in ")[0] for line in turn_lines] == [
        f"turn started: {turn} conversation=shop",
        f"turn completed: {turn}",
    ]
    assert not [line for line in lines if "gate waiting" in line]
    assert all(line.rsplit(" queued=", 1)[-1].isdigit() for line in turn_lines)
    assert workers.handler_runs() == {"refund A1": 1}
    store = SqliteStore(workers.store)
    sink = SqliteAuditSink(workers.audit)
    try:
        _, calls = asyncio.run(store.load_conversation("shop"))
        assert [(c.id, c.is_error, c.ran) for c in calls] == [(f"{turn}-r", False, True)]
        assert [d.action for d in calls[0].decisions] == ["approved"]
        assert sink.verify()
        rows = [r.entry for r in sink.rows() if r.entry.call_id == f"{turn}-r"]
        assert rows[-1].decision == "approved"
    finally:
        store.close()
        sink.close()


def test_a_rejection_from_the_cli_denies_the_call_and_the_model_reads_the_reason(
    workers: Workers,
) -> None:
    client = DurableClient(workers.system_database)
    try:
        turn = client.enqueue("refund B2", conversation_id="shop")
        worker = workers.start()
        gate_id = _gate_id(workers.read_until(worker, "gate waiting:"))
        rejected = workers.cli(
            "approve", "--config", str(workers.config), gate_id, "--reject", "--reason", "no way"
        )
        assert rejected.returncode == 0, rejected.stderr
        assert rejected.stdout.strip() == f"rejected {gate_id}"
        outcome = client.result(turn, timeout=60)
        again = workers.cli("approve", "--config", str(workers.config), gate_id)
        workers.stop(worker)
    finally:
        client.close()
    assert outcome["status"] == "completed"
    assert "no way" in str(outcome["output"])
    assert workers.handler_runs() == {}
    assert again.returncode == 1  # the turn no longer waits on it
    assert "E_DURABLE_GATE_NOT_WAITING" in again.stderr


def test_approve_refuses_gate_ids_no_turn_waits_on_and_reports_usage_errors(
    workers: Workers,
) -> None:
    config = str(workers.config)
    malformed = workers.cli("approve", "--config", config, "not-a-gate")
    assert malformed.returncode == 1
    assert "not a durable gate id" in malformed.stderr
    unknown = workers.cli("approve", "--config", config, "turn_nobody:gate-1")
    assert unknown.returncode == 1
    assert "no turn is waiting" in unknown.stderr
    assert workers.cli("approve", "--config", config).returncode == 2
    assert workers.cli("approve", "gate:gate-1").returncode == 2  # no --config nor --db
    missing = workers.cli("approve", "--config", str(workers.folder / "nope.toml"), "x:gate-1")
    assert missing.returncode == 3
    assert "cannot be read" in missing.stderr


def test_a_value_the_gate_schema_refuses_rejects_the_gate_instead_of_running_the_call(
    workers: Workers,
) -> None:
    client = DurableClient(workers.system_database)
    try:
        turn = client.enqueue("refund C3", conversation_id="shop")
        worker = workers.start()
        gate_id = _gate_id(workers.read_until(worker, "gate waiting:"))
        bad_json = workers.cli("approve", "--config", str(workers.config), gate_id, "--value", "{")
        assert bad_json.returncode == 2
        sent = workers.cli("approve", "--config", str(workers.config), gate_id, "--value", '"y"')
        assert sent.returncode == 0, sent.stderr
        outcome = client.result(turn, timeout=60)
        workers.stop(worker)
    finally:
        client.close()
    assert "E_INVALID_TURN_GATE_RESOLUTION" in str(outcome["output"])  # ApprovalGate: StrictBool
    assert workers.handler_runs() == {}
