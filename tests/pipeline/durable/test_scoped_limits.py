"""A per-customer `ToolCallLimit` on durable workers (``loopware worker`` processes, DBOS).

40 turns of one customer are queued at once; the workers run them concurrently, each turn
proposing 6 ``record`` calls; the limit (10 per customer, ``tests/pipeline/durable/app.py``)
is kept in the shared turn store. Every handler run appends its token to one log file: exactly
10 lines, whatever the interleaving.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.durable import DurableClient, DurableTurnOutcome

from ..._pg import PgServer
from .app import CUSTOMER_LIMIT
from .conftest import Workers

TURNS = 40


def run_turns(workers: Workers, count: int, store: str) -> dict[str, DurableTurnOutcome]:
    started = []
    for n in range(count):  # every worker is polling the queue before the turns arrive
        workers.write_config(
            executor_id=f"worker-{n}", store=store, concurrency=4, middleware=("customer_limit",)
        )
        started.append(workers.start())
    client = DurableClient(workers.system_database)
    try:
        turns = [
            client.enqueue("go", conversation_id=f"cust-7-{i}", stash={"customer": "cust-7"})
            for i in range(TURNS)
        ]
        outcomes = {t: client.result(t, timeout=300) for t in turns}
        for proc in started:
            workers.stop(proc)
    finally:
        client.close()
    return outcomes


def check(workers: Workers, outcomes: dict[str, DurableTurnOutcome]) -> None:
    assert all(o["status"] == "completed" for o in outcomes.values())
    runs = workers.handler_runs()
    assert sum(runs.values()) == CUSTOMER_LIMIT
    assert max(runs.values()) == 1


@pytest.fixture
def pg_workers(tmp_path: Path, pg_server: PgServer) -> Iterator[Workers]:
    system = pg_server.create_database("dbos")
    store = pg_server.create_database("store")
    name = system.rsplit("dbname=", 1)[1]
    url = f"postgresql://{pg_server.user}@/{name}?host={pg_server.socket_dir}&port={pg_server.port}"
    team = Workers(tmp_path, system_database=url)
    team.store_conninfo = store  # type: ignore[attr-defined]  # this test's own attribute
    team.system_conninfo = system  # type: ignore[attr-defined]
    try:
        yield team
    finally:
        team.close()
        pg_server.drop_database(store)
        pg_server.drop_database(system)


def test_four_durable_workers_on_postgresql_run_a_customer_limit_of_10_exactly(
    pg_workers: Workers,
) -> None:
    """4 workers, 40 concurrent turns of one customer: 10 record handler runs in all."""
    store: str = pg_workers.store_conninfo  # type: ignore[attr-defined]
    check(pg_workers, run_turns(pg_workers, 4, store))
    import psycopg

    system: str = pg_workers.system_conninfo  # type: ignore[attr-defined]
    with psycopg.connect(system) as conn:
        executors = conn.execute(
            "SELECT executor_id, count(*) FROM dbos.workflow_status GROUP BY executor_id"
        ).fetchall()
    print("turns per executor:", sorted(executors))
    assert len(executors) >= 2, executors  # the turns really ran on several workers


def test_two_durable_workers_on_one_sqlite_file_run_a_customer_limit_of_10_exactly(
    workers: Workers,
) -> None:
    """2 workers sharing one SQLite store file, 40 turns of one customer: 10 runs in all."""
    check(workers, run_turns(workers, 2, "sqlite:agent.db"))
