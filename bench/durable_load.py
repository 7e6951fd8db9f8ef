"""Durable turns under load: queued turns finished by worker processes.

Run as ``python -m bench.durable_load [--quick] [--turns N] [--workers K]``. Two set-ups:

* one worker process on SQLite (system database and store: the single-machine default);
* K worker processes (default 4) on PostgreSQL (DBOS system database and `PostgresStore` in a
  throw-away server started with ``initdb``/``pg_ctl`` on a temporary directory).

Each queues N turns (default 1,000; ``--quick``: 40) with `DurableClient`, starts the workers,
and measures turns per second from the first worker being ready to the last turn finished. Then
it checks every row: each turn stored exactly its 3 messages and 1 tool call, the counting tool
ran exactly once per call, nothing lost, nothing duplicated (it exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pipeline.durable import DurableClient, DurableTurnOutcome

ROOT = Path(__file__).resolve().parents[1]
APP = "bench.durable_app"


@contextlib.contextmanager
def postgres(folder: Path) -> Iterator[tuple[str, str]]:
    """Start a throw-away server; yield (system database URL, store conninfo)."""
    sys.path.insert(0, str(ROOT))
    from tests._pg import find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    run = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="loopware-bench-pg-", dir=folder))
    if run:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", 5433
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    subprocess.run(
        [*run, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
         "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True, env=env,
    )
    options = f"-k {root} -p {port} -c listen_addresses='' -c max_connections=300"
    subprocess.run(
        [*run, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w",
         "-o", options, "start"],
        check=True, capture_output=True, env=env,
    )
    try:
        import psycopg

        base = f"host={root} port={port} user=postgres"
        with psycopg.connect(f"{base} dbname=postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE loopware_system")
            conn.execute("CREATE DATABASE loopware_store")
        yield (
            f"postgresql://postgres@/loopware_system?host={root}&port={port}",
            f"{base} dbname=loopware_store",
        )
    finally:
        subprocess.run(
            [*run, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            capture_output=True, env=env, check=False,
        )


def write_config(folder: Path, system: str, store: str, executor: str, concurrency: int) -> Path:
    path = folder / f"{executor}.toml"
    path.write_text(
        f'system_database = "{system}"\nconcurrency = {concurrency}\npoll_interval = 0.05\n'
        f'executor_id = "{executor}"\n[runner]\nmodel_from = "{APP}:model"\n'
        f'tools = ["{APP}:TOOLS"]\nmiddleware = ["{APP}:stack"]\nstore = "{store}"\n'
        'spool = "spool"\n',
        encoding="utf-8",
    )
    return path


def run_setup(
    name: str, folder: Path, system: str, store: str, turns: int, workers: int, concurrency: int
) -> float:
    """Queue ``turns``, run ``workers`` processes until all finished; return turns per second."""
    log = folder / f"{name}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOOPWARE_BENCH_LOG": str(log)}
    client = DurableClient(system)
    ids = {client.enqueue("go", conversation_id=f"{name}-{i}"): f"{name}-{i}" for i in range(turns)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "loopware_cli", "worker", "--config",
             str(write_config(folder, system, store, f"{name}-w{k}", concurrency))],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for k in range(workers)
    ]
    try:
        assert procs[0].stdout is not None
        while "worker ready" not in procs[0].stdout.readline():
            if procs[0].poll() is not None:
                raise SystemExit(procs[0].communicate()[1][-3000:])
        start = time.perf_counter()
        while True:
            done = client.statuses(list(ids)).values()
            if len(done) == len(ids) and all(s == "SUCCESS" for s in done):
                break
            bad = [s for s in done if s not in {"SUCCESS", "PENDING", "ENQUEUED"}]
            if bad:
                raise SystemExit(f"{name}: turns ended {Counter(bad)}")
            time.sleep(0.25)
        elapsed = time.perf_counter() - start
        finished = client.outcomes(list(ids))
        outcomes = [finished[t] for t in ids]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.communicate(timeout=60)
        client.close()
    check_rows(name, folder, store, ids, log, outcomes)
    return turns / elapsed


def check_rows(
    name: str,
    folder: Path,
    store_spec: str,
    ids: dict[str, str],
    log: Path,
    outcomes: list[DurableTurnOutcome],
) -> None:
    """Every turn: 3 messages, 1 call, its handler run once; nothing lost or duplicated."""
    from pipeline.stores import FileSpoolStore, PostgresStore, SqliteStore

    async def load() -> list[tuple[int, int, list[str]]]:
        store: SqliteStore | PostgresStore
        if store_spec.startswith("sqlite:"):
            store = SqliteStore(folder / store_spec.removeprefix("sqlite:"))
        else:
            store = PostgresStore(store_spec, spool=FileSpoolStore(folder / "spool"))
        found = []
        try:
            for conversation in ids.values():
                messages, calls = await store.load_conversation(conversation)
                found.append((len(messages), len({m.id for m in messages}), [c.id for c in calls]))
        finally:
            closing = getattr(store, "aclose", None)
            if closing is not None:
                await closing()
        return found

    runs = Counter(log.read_text(encoding="utf-8").split())
    problems = []
    for (turn, _), (n_messages, distinct, calls), outcome in zip(
        ids.items(), asyncio.run(load()), outcomes, strict=True
    ):
        if (n_messages, distinct, calls) != (3, 3, [f"{turn}-0"]):
            problems.append(f"{turn}: {n_messages} messages ({distinct} distinct), calls {calls}")
        if runs[turn] != 1 or outcome["status"] != "completed":
            problems.append(f"{turn}: handler ran {runs[turn]} times, {outcome['status']}")
    extra = set(runs) - set(ids)
    if problems or extra:
        raise SystemExit(f"{name}: {len(problems)} bad turns {problems[:5]}, unknown {extra}")
    print(f"  {name}: {len(ids)} turns, {3 * len(ids)} messages and {len(ids)} calls stored, "
          "each handler ran once: nothing lost or duplicated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="40 turns (a smoke test)")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16, help="turns per worker at once")
    args = parser.parse_args()
    turns = args.turns or (40 if args.quick else 1000)
    with tempfile.TemporaryDirectory(prefix="loopware-bench-durable-") as tmp:
        folder = Path(tmp)
        os.chmod(folder, 0o755)
        sqlite_rate = run_setup(
            "sqlite", folder, f"sqlite:///{folder / 'system.sqlite'}", "sqlite:agent.db",
            turns, 1, args.concurrency,
        )
        print(f"SQLite, 1 worker: {turns} turns, {sqlite_rate:.1f} turns/s")
        with postgres(folder) as (system, store):
            pg_rate = run_setup("pg", folder, system, store, turns, args.workers, args.concurrency)
        print(f"PostgreSQL, {args.workers} workers: {turns} turns, {pg_rate:.1f} turns/s "
              f"({pg_rate / sqlite_rate:.2f}x one SQLite worker)")


if __name__ == "__main__":
    main()
