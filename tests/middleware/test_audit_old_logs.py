"""Logs written before a call's row carried ``ran`` and ``decisions`` still open, verify and
go on: the row hash covers those fields only when they are set.

``tests/data/audit/old-audit.sqlite`` (schema version 2) and ``old-audit.jsonl`` (with its
``.head``) were written by the audit code of commit 0f87e20 (the tree before "one call, one
record"): one turn of conversation ``old`` in which call ``b`` repeated call ``a`` and a
`RepetitionDetector` hid the tool, so the old protocol wrote ``b`` twice (``allowed``, then
``hidden``), then a call ``c`` to an unknown tool (``allowed``, as the old log said) and the
turn. The PostgreSQL log of the old layout (version 1) is built here row by row, as that code
wrote it (`_old_rows.old_fields`).
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from middleware.audit import (
    AuditEntry,
    AuditRow,
    JsonlAuditSink,
    PostgresAuditSink,
    SqliteAuditSink,
)
from middleware.audit._chain import GENESIS_HASH, row_hash

from ._old_rows import OLD_COLUMNS, old_fields

DATA = Path(__file__).resolve().parents[1] / "data" / "audit"
OLD = [
    ("tool_call", "a", "allowed"),
    ("tool_call", "b", "allowed"),
    ("tool_call", "b", "hidden"),
    ("tool_call", "c", "allowed"),
    ("turn", None, None),
]
"""What the old log holds: (kind, call id, decision) per row."""

Sink = SqliteAuditSink | JsonlAuditSink | PostgresAuditSink


def new_entry(call_id: str) -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id="t-new",
        conversation_id=None,
        recorded_at=datetime(2026, 11, 27, tzinfo=UTC),
        call_id=call_id,
        tool="search",
        checksum="0" * 64,
        args='{"q":"x"}',
        decision="denied",
        policy="loopware.policy",
        reason="no",
        ran=False,
        decisions='[{"action":"denied","policy":"loopware.policy","reason":"no","when":"before"}]',
    )


def append(sink: Sink, entries: list[AuditEntry]) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        return await sink.append(entries)

    return asyncio.run(go())


def summary(sink: Sink) -> list[tuple[str, str | None, str | None]]:
    return [(r.entry.kind, r.entry.call_id, r.entry.decision) for r in sink.rows()]


def check_old_then_new(sink: Sink) -> None:
    """The old rows read and verify as written; new rows with the new fields chain after."""
    assert sink.verify()
    assert summary(sink) == OLD
    assert {(r.entry.ran, r.entry.decisions) for r in sink.rows()} == {(None, None)}
    old_head = sink.head()
    rows = append(sink, [new_entry("d"), new_entry("e")])
    assert [r.index for r in rows] == [5, 6]
    assert rows[0].prev_hash == old_head.hash
    assert sink.verify()
    [*_, d, e] = sink.rows()
    assert (d.entry.ran, e.entry.decision) == (False, "denied")
    assert d.entry.decisions == new_entry("d").decisions


@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_an_old_sqlite_log_migrates_verifies_and_goes_on(tmp_path: Path, synchronous: str) -> None:
    """The version 2 file gains the two columns (version 3) and keeps verifying, before and
    after new rows, and after reopening."""
    path = tmp_path / "audit.sqlite"
    shutil.copy(DATA / "old-audit.sqlite", path)
    sink = SqliteAuditSink(path, synchronous=synchronous)  # type: ignore[arg-type]
    try:
        check_old_then_new(sink)
    finally:
        sink.close()
    reopened = SqliteAuditSink(path)
    try:
        assert reopened.verify()
        assert len(reopened.rows()) == 7
    finally:
        reopened.close()


def test_an_old_jsonl_log_verifies_and_goes_on(tmp_path: Path) -> None:
    """Old lines (sixteen fields) and new lines (with ``ran`` and ``decisions``) share a chain."""
    path = tmp_path / "audit.jsonl"
    shutil.copy(DATA / "old-audit.jsonl", path)
    shutil.copy(DATA / "old-audit.jsonl.head", f"{path}.head")
    sink = JsonlAuditSink(path, synchronous="normal")
    try:
        check_old_then_new(sink)
    finally:
        sink.close()
    lines = path.read_bytes().splitlines()
    assert b'"ran"' not in lines[0]
    assert b'"ran":false' in lines[-1]
    reopened = JsonlAuditSink(path)
    try:
        assert reopened.verify()
    finally:
        reopened.close()


def test_an_old_row_given_the_new_fields_no_longer_verifies(tmp_path: Path) -> None:
    """Writing ``ran`` onto a row that was hashed without it is an edit ``verify()`` reports."""
    path = tmp_path / "audit.sqlite"
    shutil.copy(DATA / "old-audit.sqlite", path)
    SqliteAuditSink(path).close()  # migrate
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE audit_rows SET ran = 1 WHERE idx = 2")
    conn.close()
    sink = SqliteAuditSink(path)
    try:
        assert sink.verify().first_bad_row == 2
    finally:
        sink.close()


def _old_postgres_log(conninfo: str, chain: str) -> list[str]:
    """Create the version 1 tables and write the old rows as that code did."""
    import psycopg

    columns = ", ".join(OLD_COLUMNS)
    free_text = {"turn_id", "conversation_id", "call_id", "tool", "checksum", "args", "policy",
                 "reason", "error", "input"}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA loopware")
        conn.execute(
            "CREATE TABLE loopware.audit_migrations "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(
            "CREATE TABLE loopware.audit_chains "
            "(chain text PRIMARY KEY, count bigint NOT NULL, hash text NOT NULL)"
        )
        conn.execute(
            "CREATE TABLE loopware.audit_rows (chain text NOT NULL, idx bigint NOT NULL, "
            "kind text, turn_id bytea, conversation_id bytea, recorded_at text, call_id bytea, "
            "tool bytea, checksum bytea, args bytea, is_error smallint, "
            "duration_ms double precision, decision text, policy bytea, reason bytea, "
            "status text, error bytea, input bytea, prev_hash text, hash text, "
            "PRIMARY KEY (chain, idx))"
        )
        conn.execute("INSERT INTO loopware.audit_migrations (version) VALUES (1)")
        prev, hashes = GENESIS_HASH, []
        for i, (kind, call_id, decision) in enumerate(OLD):
            entry = AuditEntry(
                kind=kind,  # type: ignore[arg-type]
                turn_id="t-old",
                conversation_id="old",
                recorded_at=datetime(2026, 11, 26, 12, 0, i, tzinfo=UTC),
                call_id=call_id,
                tool=None if call_id is None else "search",
                checksum=None if call_id is None else f"{i:064x}",
                args=None if call_id is None else '{"q":"loop"}',
                decision=decision,  # type: ignore[arg-type]
                status="completed" if kind == "turn" else None,
            )
            fields = old_fields(entry)
            digest = row_hash(i, fields, prev)
            fields["is_error"] = int(fields["is_error"])
            values = [
                v.encode() if name in free_text and v is not None else v
                for name, v in fields.items()
            ]
            conn.execute(
                f"INSERT INTO loopware.audit_rows (chain, idx, {columns}, prev_hash, hash) "
                f"VALUES (%s, %s, {', '.join(['%s'] * len(OLD_COLUMNS))}, %s, %s)",
                (chain, i, *values, prev, digest),
            )
            prev = digest
            hashes.append(digest)
        conn.execute(
            "INSERT INTO loopware.audit_chains VALUES (%s, %s, %s)", (chain, len(OLD), prev)
        )
    return hashes


def test_an_old_postgres_log_migrates_verifies_and_goes_on(pg_conninfo: str) -> None:
    """Version 1 tables gain the two columns (version 2); the old chain verifies and goes on."""
    pytest.importorskip("psycopg")
    hashes = _old_postgres_log(pg_conninfo, "old")
    sink = PostgresAuditSink(pg_conninfo, chain="old")
    try:
        assert [r.hash for r in sink.rows()] == hashes
        check_old_then_new(sink)
    finally:
        sink.close()
    import psycopg

    with psycopg.connect(pg_conninfo) as conn:
        versions = conn.execute("SELECT version FROM loopware.audit_migrations ORDER BY 1")
        assert versions.fetchall() == [(1,), (2,), (3,)]
