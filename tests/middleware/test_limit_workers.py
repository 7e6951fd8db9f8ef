"""Scoped limits across worker processes: the store, not a process, holds the count.

Plain processes (``tests/middleware/_limit_worker.py``) each run turns of one customer with
`TurnRunner` against one shared store; every refund handler run appends a line to one file.
The durable-worker (DBOS) version is ``tests/pipeline/durable/test_scoped_limits.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from middleware import ToolCallLimit
from pipeline import ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import SqliteStore
from pipeline.testing import ScriptedModel

from .._pg import PgServer
from ._limit_worker import HANG_TTL, LIMIT

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.middleware._limit_worker", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_workers(target: str, log: Path, processes: int, turns_each: int) -> list[str]:
    procs = [start("turns", target, str(log), str(turns_each)) for _ in range(processes)]
    time.sleep(1.0)  # let every process import and open its store before the gun
    log.with_name(log.name + ".go").touch()
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_two_processes_on_one_sqlite_file_run_exactly_the_limit(tmp_path: Path) -> None:
    """2 processes x 20 concurrent turns of one customer, limit 10: 10 handler runs in all."""
    lines = run_workers(str(tmp_path / "turns.db"), tmp_path / "runs.log", 2, 20)
    assert len(lines) == LIMIT
    assert len(set(lines)) == LIMIT  # each order once


def test_four_processes_on_postgresql_run_exactly_the_limit(
    tmp_path: Path, pg_server: PgServer
) -> None:
    """4 processes x 10 concurrent turns of one customer on PostgreSQL, limit 10: 10 runs."""
    store = pg_server.create_database("limits")
    try:
        lines = run_workers(store, tmp_path / "runs.log", 4, 10)
    finally:
        pg_server.drop_database(store)
    assert len(lines) == LIMIT
    assert len(set(lines)) == LIMIT


def customer(ctx: TurnContext) -> str:
    return str(ctx.stash.get("customer"))


async def test_a_killed_workers_reservation_comes_back_after_its_expiry_once(
    tmp_path: Path,
) -> None:
    """A worker SIGKILLed inside its handler holds the only slot until the reservation
    expires; then exactly one more refund runs, never two (this process's clock is moved
    past the expiry by hand)."""
    target, log = str(tmp_path / "turns.db"), tmp_path / "runs.log"
    proc = start("hang", target, str(log))
    deadline = time.monotonic() + 60
    while not (log.exists() and "started" in log.read_text()) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    runs: list[str] = []

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        runs.append(order)
        return "refunded"

    offset = 0.0  # this process's clock: real time, moved past the expiry by hand

    def clock() -> float:
        return time.time() + offset

    limit = ToolCallLimit(
        {"refund": 1},
        scope=customer,
        scope_name="customer",
        reservation_ttl=HANG_TTL,
        clock=clock,
    )
    batch = ModelResponse(
        tool_calls=[
            ProposedToolCall(id=f"r{i}", name="refund", arguments=json.dumps({"order": str(i)}))
            for i in range(3)
        ]
    )

    async def turn() -> int:
        before = len(runs)
        async with SqliteStore(target, synchronous="normal") as store:
            runner = TurnRunner(
                executor=ToolLoopExecutor(ScriptedModel([batch])),
                tools=[refund],
                middleware=[limit],
                store=store,
            )
            await runner.run("refund", stash={"customer": "cust-7"})
        return len(runs) - before

    held = await turn()  # well within the 30 s expiry
    offset = HANG_TTL.total_seconds() + 1.0
    freed = await turn()
    after = await turn()
    assert (held, freed, after) == (0, 1, 0)


@pytest.fixture(autouse=True)
def _no_stray_go_files(tmp_path: Path) -> None:
    """Every test starts without a start signal."""
    for go in tmp_path.glob("*.go"):
        go.unlink()
