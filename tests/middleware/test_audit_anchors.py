"""Anchors: a head kept outside the log finds what no chain can on its own (a rollback of the
whole log), and keyed rows written in a store's transaction or by a process killed mid-append.

Runs against every sink where it can (the `sinks` fixture), with the forger and the key of
``tests/middleware/_forger.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from middleware.audit import (
    AuditAnchorFile,
    AuditHead,
    JsonlAuditSink,
    PostgresAuditSink,
    SqliteAuditSink,
)
from pipeline.errors import InvalidMiddlewareConfigError

from ._forger import KEY, append, entry, found, logged, write
from ._sinks import PostgresSinks, Sink, SinkBackend


# -- anchors -----------------------------------------------------------------------------------
def test_the_anchor_gets_every_new_head(sinks: SinkBackend, tmp_path: Path) -> None:
    """``anchor=`` is handed the head after each append, in order."""
    heads: list[AuditHead] = []
    rows = logged(sinks, tmp_path, 3, anchor=heads.append)
    assert heads == [AuditHead(i + 1, r.hash) for i, r in enumerate(rows)]


def test_an_anchor_file_keeps_the_latest_head(tmp_path: Path) -> None:
    """`AuditAnchorFile` holds one JSON line, the last head written (a longer one replaced by a
    shorter one leaves no trace); `read` is None for a missing file."""
    anchor = AuditAnchorFile(tmp_path / "head.anchor")
    assert anchor.read() is None
    anchor(AuditHead(123456, f"hmac-sha256:{KEY.id}:" + "a" * 64))
    anchor(AuditHead(7, "b" * 64))
    assert anchor.read() == AuditHead(7, "b" * 64)
    assert json.loads((tmp_path / "head.anchor").read_text()) == {"count": 7, "hash": "b" * 64}
    with pytest.raises(InvalidMiddlewareConfigError):
        AuditAnchorFile("")


def test_a_sink_refuses_an_anchor_that_is_not_callable(tmp_path: Path) -> None:
    """``anchor="path"`` is a mistake (use AuditAnchorFile(path)): it raises at once."""
    with pytest.raises(InvalidMiddlewareConfigError, match="anchor"):
        JsonlAuditSink(tmp_path / "audit.jsonl", anchor="head.anchor")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_anchored_head_finds_a_rollback_of_the_whole_keyed_log(
    tmp_path: Path, kind: str
) -> None:
    """A copy of the log (rows and sealed head) taken after 2 rows and put back after 5 is a
    consistent keyed log; the anchor, kept elsewhere, reports row 2 as missing."""
    log, elsewhere = tmp_path / "log", tmp_path / "elsewhere"
    log.mkdir()
    elsewhere.mkdir()
    anchor = AuditAnchorFile(elsewhere / "audit.anchor")
    path = log / f"audit.{kind}"
    names = [path.name, f"{path.name}.head"] if kind == "jsonl" else [path.name]

    def open_sink() -> Sink:
        if kind == "jsonl":
            return JsonlAuditSink(path, synchronous="normal", key=KEY, anchor=anchor)
        return SqliteAuditSink(path, synchronous="normal", key=KEY, anchor=anchor)

    sink = open_sink()
    write(sink, 2)
    sink.close()  # (SQLite: checkpointed into the file)
    for name in names:
        shutil.copy(log / name, tmp_path / name)
    sink = open_sink()
    asyncio.run(append(sink, [entry(2), entry(3), entry(4)]))
    sink.close()
    for name in names:
        shutil.copy(tmp_path / name, log / name)
    rolled_back = open_sink()
    try:
        assert rolled_back.verify()  # consistent on its own, sealed by the key
        assert rolled_back.verify(head=anchor.read()).first_bad_row == 2
    finally:
        rolled_back.close()


def test_a_rollback_of_a_keyed_postgres_chain_is_found_by_its_anchor(
    pg_conninfo: str, tmp_path: Path
) -> None:
    """The chain's rows deleted back to an earlier head, and that head (with its seal) put
    back: the anchor reports the rows that are gone."""

    sinks = PostgresSinks(pg_conninfo)
    anchor = AuditAnchorFile(tmp_path / "audit.anchor")
    sink = sinks.open(tmp_path, key=KEY, anchor=anchor)
    write(sink, 2)
    [earlier] = sinks.sql(tmp_path, "SELECT count, hash, seal FROM audit_head")
    asyncio.run(append(sink, [entry(2), entry(3)]))
    sink.close()
    sinks.sql(tmp_path, "DELETE FROM audit_rows WHERE idx >= 2")
    sinks.sql(tmp_path, "UPDATE audit_head SET count = ?, hash = ?, seal = ?", earlier)
    assert found(sinks, tmp_path) is None
    reopened = sinks.open(tmp_path, key=KEY)
    try:
        assert reopened.verify(head=anchor.read()).first_bad_row == 2
    finally:
        reopened.close()


# -- a store's transaction ---------------------------------------------------------------------
def test_rows_written_in_a_store_transaction_are_keyed_sealed_and_anchored(
    tmp_path: Path,
) -> None:
    """`SqliteAuditSink.joint` (a `SqliteStore`'s transaction on the same file) writes keyed
    rows and a sealed head row, and hands the head to the anchor once committed."""
    path = tmp_path / "shared.sqlite"
    heads: list[AuditHead] = []
    sink = SqliteAuditSink(path, synchronous="normal", key=KEY, anchor=heads.append)
    write(sink, 1)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        writer = sink.joint([entry(1), entry(2)])
        writer.write(cur)
        cur.execute("COMMIT")
        writer.settle(True)
    finally:
        conn.close()
    try:
        rows = sink.rows()
        assert [r.index for r in rows] == [0, 1, 2]
        assert all(r.hash.startswith(f"hmac-sha256:{KEY.id}:") for r in rows)
        assert heads == [AuditHead(1, rows[0].hash), AuditHead(3, rows[2].hash)]
        assert sink.head() == heads[-1]
        assert sink.verify()
    finally:
        sink.close()
    reopened = SqliteAuditSink(path, key=KEY)
    try:
        assert reopened.verify()
    finally:
        reopened.close()


async def test_rows_written_in_a_postgres_store_transaction_are_keyed_and_sealed(
    pg_conninfo: str,
) -> None:
    """`PostgresAuditSink.joint` (a `PostgresStore`'s transaction) chains keyed rows after the
    sink's own, seals the head and hands it to the anchor once committed."""
    import psycopg

    heads: list[AuditHead] = []
    sink = PostgresAuditSink(pg_conninfo, chain="joint", key=KEY, anchor=heads.append)
    try:
        await sink.append([entry(0)])
        writer = sink.joint([entry(1), entry(2)])
        connect = psycopg.AsyncConnection.connect
        async with await connect(pg_conninfo) as conn, conn.transaction():
            await writer.write(conn)  # type: ignore[misc]
        writer.settle(True)
        rows = sink.rows()
        assert [r.index for r in rows] == [0, 1, 2]
        assert all(r.hash.startswith(f"hmac-sha256:{KEY.id}:") for r in rows)
        assert heads == [AuditHead(1, rows[0].hash), AuditHead(3, rows[2].hash)]
        assert sink.head() == heads[-1]
        assert sink.verify()
    finally:
        sink.close()


# -- kills -------------------------------------------------------------------------------------
_KILLED_WRITER = '''
import asyncio, sys
from datetime import UTC, datetime
from middleware.audit import AuditEntry, AuditKey, JsonlAuditSink

path, sync, secret = sys.argv[1:4]


async def main():
    sink = JsonlAuditSink(path, synchronous=sync, key=AuditKey(bytes.fromhex(secret)))
    print("ready", flush=True)
    n = 0
    while True:
        turn = AuditEntry(kind="turn", turn_id=f"t{n}", conversation_id=None,
                          recorded_at=datetime.now(UTC), input="x" * (n % 300))
        await asyncio.gather(*(sink.append([turn] * (1 + k)) for k in range(3)))
        n += 1


asyncio.run(main())
'''


@pytest.mark.parametrize("sync", ["normal", "full"])
def test_a_keyed_jsonl_log_killed_again_and_again_still_verifies(
    tmp_path: Path, sync: str
) -> None:
    """15 SIGKILLs at random moments of a process appending to a keyed JSON Lines log: the
    head may lag the rows or a tail be torn, never in a way the keyed verifier reports."""
    rng = random.Random(sync)
    path = tmp_path / "audit.jsonl"
    script = tmp_path / "writer.py"
    script.write_text(_KILLED_WRITER, encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for _ in range(15):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), sync, bytes(range(32)).hex()],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        assert child.stdout is not None
        ready = child.stdout.readline()
        time.sleep(rng.uniform(0.01, 0.15))
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=30)
        assert ready == b"ready\n", err.decode(errors="replace")
    sink = JsonlAuditSink(path, synchronous="normal", key=KEY)
    try:
        assert sink.verify()
        rows = sink.rows()
        assert len(rows) > 15
        assert all(r.hash.startswith(f"hmac-sha256:{KEY.id}:") for r in rows)
    finally:
        sink.close()
