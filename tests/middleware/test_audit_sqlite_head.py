"""Where an SQLite audit log keeps its head: the last row of ``audit_rows``
(``middleware/audit/_sqlite_schema.py``), written by every append in the page it writes anyway."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from middleware.audit import AuditEntry, AuditHead, SqliteAuditSink
from middleware.audit._chain import GENESIS_HASH, row_hash

from ._old_rows import old_fields

_FRAME = 24 + 4096  # a WAL frame: its header and one page (SQLite's default page size)


def entry(i: int) -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id=f"t{i // 3}",
        conversation_id="c",
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=i),
        call_id=f"call-{i}",
        tool="search",
        checksum=f"{i:064x}",
        args='{"q":"x"}',
        is_error=False,
        duration_ms=1.5,
    )


def table(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(
            "SELECT idx, call_id, prev_hash IS NULL, head_count FROM audit_rows ORDER BY idx"
        ).fetchall()
    conn.close()
    return found


def tamper(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()


async def test_the_head_is_the_last_row_and_moves_with_every_append(tmp_path: Path) -> None:
    """A new log holds only its head row; each append turns it into a row and adds the next."""
    path = tmp_path / "audit.sqlite"
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        assert table(path) == [(0, None, 1, 0)]
        await sink.append([entry(0)])
        await sink.append([entry(1), entry(2)])
        assert table(path) == [
            (0, "call-0", 0, None),
            (1, "call-1", 0, None),
            (2, "call-2", 0, None),
            (3, None, 1, 3),
        ]
        assert sink.head() == AuditHead(3, sink.rows()[-1].hash)
        assert len(sink.rows()) == 3
        assert sink.verify()
    finally:
        sink.close()


async def test_a_one_row_append_writes_one_page(tmp_path: Path) -> None:
    """One-row appends grow the WAL by one frame each: the head shares the rows' page."""
    path = tmp_path / "audit.sqlite"
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        await sink.append([entry(0)])
        before = os.path.getsize(f"{path}-wal")
        for i in range(1, 101):
            await sink.append([entry(i)])
        frames = (os.path.getsize(f"{path}-wal") - before) / _FRAME
        # 100 frames, plus one or two more each time the rightmost page fills and splits.
        assert 100 <= frames <= 140, frames
        assert sink.verify()
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("statements", "missing"),
    [
        (("DELETE FROM audit_rows WHERE idx >= 3",), 3),
        (("DELETE FROM audit_rows",), 0),
        (("DELETE FROM audit_rows WHERE prev_hash IS NULL",), 5),
        (  # cut the last rows and renumber what is after them (the head row) down
            (
                "DELETE FROM audit_rows WHERE idx IN (3, 4)",
                "UPDATE audit_rows SET idx = idx - 2 WHERE idx > 4",
            ),
            3,
        ),
    ],
    ids=["range-delete", "all-deleted", "head-deleted", "cut-and-renumber"],
)
async def test_rows_cut_from_the_end_are_reported_however_the_head_row_fares(
    tmp_path: Path, statements: tuple[str, ...], missing: int
) -> None:
    """Deleting the end of the log takes the head row with it or leaves its count behind:
    either way verify() reports the first row that may be missing, also after more appends."""
    path = tmp_path / "audit.sqlite"
    sink = SqliteAuditSink(path, synchronous="normal")
    for i in range(5):
        await sink.append([entry(i)])
    sink.close()
    tamper(path, *statements)
    reopened = SqliteAuditSink(path, synchronous="normal")
    try:
        assert reopened.verify().first_bad_row == missing
        await reopened.append([entry(9)])  # the next row does not hide the cut
        assert reopened.verify().first_bad_row == missing
    finally:
        reopened.close()


def _v1_file(path: Path, count: int, head: int) -> list[str]:
    """A log as schema version 1 wrote it: rows, and ``head`` in the one-row ``audit_head``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE audit_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    conn.execute(
        "CREATE TABLE audit_rows (idx INTEGER PRIMARY KEY, kind TEXT, turn_id TEXT, "
        "conversation_id TEXT, recorded_at TEXT, call_id TEXT, tool TEXT, checksum TEXT, "
        "args TEXT, is_error, duration_ms, decision TEXT, policy TEXT, reason TEXT, status TEXT, "
        "error TEXT, input TEXT, prev_hash TEXT, hash TEXT)"
    )
    conn.execute("CREATE TABLE audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), "
                 "count INTEGER NOT NULL, hash TEXT NOT NULL)")
    conn.execute("INSERT INTO audit_migrations VALUES (1, datetime('now'))")
    prev, hashes = GENESIS_HASH, []
    for i in range(count):
        fields = old_fields(entry(i))
        digest = row_hash(i, fields, prev)
        fields["is_error"] = int(fields["is_error"])
        conn.execute("INSERT INTO audit_rows VALUES (?, " + ", ".join("?" * 16) + ", ?, ?)",
                     (i, *fields.values(), prev, digest))
        prev = digest
        hashes.append(digest)
    conn.execute("INSERT INTO audit_head VALUES (1, ?, ?)", (head, hashes[head - 1]))
    conn.close()
    return hashes


async def test_a_version_1_log_moves_its_head_into_the_rows(tmp_path: Path) -> None:
    """Opening a version 1 log drops ``audit_head`` for a head row, and the chain goes on."""
    path = tmp_path / "audit.sqlite"
    hashes = _v1_file(path, 4, head=4)
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        with sqlite3.connect(path) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema")}
            versions = [v for (v,) in conn.execute("SELECT version FROM audit_migrations")]
        conn.close()
        assert "audit_head" not in tables
        assert versions == [1, 2, 3, 4]
        assert table(path)[-1] == (4, None, 1, 4)
        assert sink.head() == AuditHead(4, hashes[-1])
        assert sink.verify()
        [row] = await sink.append([entry(4)])
        assert (row.index, row.prev_hash) == (4, hashes[-1])
        assert sink.verify()
    finally:
        sink.close()


async def test_a_cut_version_1_log_stays_cut_after_its_head_moves(tmp_path: Path) -> None:
    """A version 1 log whose last rows were deleted (its head still counts them) keeps the cut
    detectable through the move and after more appends."""
    path = tmp_path / "audit.sqlite"
    _v1_file(path, 5, head=5)
    tamper(path, "DELETE FROM audit_rows WHERE idx >= 3")
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        assert sink.verify().first_bad_row == 3
        [row] = await sink.append([entry(7)])
        assert row.index == 5  # after the head, leaving the gap in sight
        assert sink.verify().first_bad_row == 3
    finally:
        sink.close()


async def test_rows_written_in_a_stores_transaction_chain_after_the_head_and_survive_tampering(
    tmp_path: Path,
) -> None:
    """Rows a `SqliteStore` writes for the sink in its own transaction move the head as an
    append does, and the sink hands out the head the file holds; a row forged after the head
    (so the head in memory cannot be taken) never fails the store's write: the rows chain after
    what the file holds and ``verify()`` still reports the forgery."""
    import json

    from middleware.audit import AuditLog
    from pipeline import ToolLoopExecutor, TurnRunner, tool
    from pipeline.models import ModelResponse, ProposedToolCall
    from pipeline.stores import SqliteStore
    from pipeline.testing import ScriptedModel

    @tool
    def search(q: str) -> str:
        """Search."""
        return q

    def turn(*ids: str) -> TurnRunner:
        steps = [ModelResponse(tool_calls=[ProposedToolCall(
            id=i, name="search", arguments=json.dumps({"q": i}))]) for i in ids]
        return TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[search],
                          middleware=[AuditLog(sink)], store=store)

    path = tmp_path / "shared.sqlite"
    sink = SqliteAuditSink(path, synchronous="normal")
    store = SqliteStore(path, synchronous="normal")
    try:
        await turn("a", "b").run("go")
        assert [row[:2] for row in table(path)] == [(0, "a"), (1, "b"), (2, None), (3, None)]
        assert sink.head().count == 3
        assert sink.verify()
        tamper(path, "INSERT INTO audit_rows (idx, kind, turn_id, prev_hash, hash, is_error) "
                     "VALUES (4, 'turn', 'forged', 'x', 'y', 0)")
        result = await turn("c").run("go")
        assert result.status == "completed"
        assert [c.id for c in await store.tool_calls_for_turn(result.turn_id)] == ["c"]
        assert [row[1] for row in table(path) if row[1] is not None] == ["a", "b", "c"]
        assert sink.verify().first_bad_row == 3  # the forged row, out of place, is found
    finally:
        store.close()
        sink.close()
