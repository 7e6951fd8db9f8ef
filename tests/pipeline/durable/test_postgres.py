"""Workers on PostgreSQL (DBOS system database and `PostgresStore` on the throw-away server):
a worker killed mid-turn is recovered by another worker with a different executor id, which
finishes every turn with each handler run at most once and every record stored once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.durable import DurableClient
from pipeline.stores import FileSpoolStore

from ..._pg import PgServer
from .app import CALLS_PER_TURN
from .conftest import Workers


@pytest.fixture
def pg_workers(tmp_path: Path, pg_server: PgServer) -> Iterator[Workers]:
    system = pg_server.create_database("dbos")
    store = pg_server.create_database("store")
    name = system.rsplit("dbname=", 1)[1]
    url = f"postgresql://{pg_server.user}@/{name}?host={pg_server.socket_dir}&port={pg_server.port}"
    team = Workers(tmp_path, system_database=url)
    team.store_conninfo = store  # type: ignore[attr-defined]  # this test's own attribute
    try:
        yield team
    finally:
        team.close()
        pg_server.drop_database(store)
        pg_server.drop_database(system)


def test_a_killed_workers_turns_are_recovered_by_another_worker_on_postgresql(
    pg_workers: Workers,
) -> None:
    workers = pg_workers
    store_conninfo: str = workers.store_conninfo  # type: ignore[attr-defined]
    client = DurableClient(workers.system_database)
    try:
        turns = {client.enqueue("go", conversation_id=f"pg-{i}"): f"pg-{i}" for i in range(6)}
        workers.write_config(executor_id="worker-a", store=store_conninfo, concurrency=3)
        first = workers.start()
        deadline = time.monotonic() + 60
        while sum(workers.handler_runs().values()) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        workers.kill(first)
        statuses = client.statuses(list(turns))
        assert "PENDING" in statuses.values()  # the kill landed mid-turn
        workers.write_config(executor_id="worker-b", store=store_conninfo, concurrency=3)
        second = workers.start("--recover", "worker-a", wait_for="recovered")
        outcomes = {t: client.result(t, timeout=120) for t in turns}
        workers.stop(second)
    finally:
        client.close()
    runs = workers.handler_runs()
    assert max(runs.values()) == 1

    async def load() -> dict[str, list[tuple[str, bool]]]:
        from pipeline.stores import PostgresStore

        store = PostgresStore(store_conninfo, spool=FileSpoolStore(workers.folder / "spool"))
        try:
            loaded = {}
            for conversation in turns.values():
                messages, calls = await store.load_conversation(conversation)
                assert len(messages) == len({m.id for m in messages}) == 5
                loaded[conversation] = [(c.id, c.is_error) for c in calls]
            return loaded
        finally:
            await store.aclose()

    stored = asyncio.run(load())
    for turn, conversation in turns.items():
        assert outcomes[turn]["status"] == "completed"
        calls = stored[conversation]
        assert [cid for cid, _ in calls] == [f"{turn}-{i}" for i in range(CALLS_PER_TURN)]
        for cid, is_error in calls:  # an interrupted call ran at most once, any other once
            assert runs.get(cid, 0) <= 1 if is_error else runs[cid] == 1
