"""Audit sinks: append order, reopening, and tamper detection by ``verify()``.

The `sinks` fixture (``tests/middleware/conftest.py``) runs the shared tests against every
sink: JSON Lines, SQLite and PostgreSQL (a throw-away server, ``tests/_pg.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from middleware.audit import (
    AuditEntry,
    AuditHead,
    AuditKey,
    AuditRow,
    JsonlAuditSink,
    SqliteAuditSink,
)
from pipeline.calls import ToolCall
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stores import SqliteStore

from ._sinks import Sink, SinkBackend

_WARNED = '[{"action":"warned","policy":"p","reason":"r","when":"before"}]'


def entry(i: int, *, turn: str = "t1") -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id=turn,
        conversation_id="c" if i % 2 else None,
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC),
        call_id=f"call-{i}",
        tool="search",
        checksum=f"{i:064x}",
        args=json.dumps({"q": i}),
        is_error=i % 3 == 0,
        duration_ms=i * 1.25,
        decision="allowed",
        ran=i % 3 != 0,
        decisions="[]" if i % 2 else _WARNED,
    )


def write(sink: Sink, count: int) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        rows: list[AuditRow] = []
        for i in range(count):
            rows += await sink.append([entry(i)])
        return rows

    return asyncio.run(go())


def append(sink: Sink, entries: list[AuditEntry]) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        return await sink.append(entries)

    return asyncio.run(go())


def test_rows_are_chained_in_append_order(sinks: SinkBackend, tmp_path: Path) -> None:
    """Appended rows come back in order, each carrying the previous row's hash."""
    sink = sinks.open(tmp_path)
    written = write(sink, 5)
    rows = sink.rows()
    assert rows == written
    assert [r.index for r in rows] == [0, 1, 2, 3, 4]
    assert rows[0].prev_hash == "0" * 64
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(rows))
    assert len({r.hash for r in rows}) == 5
    assert sink.head() == AuditHead(5, rows[-1].hash)
    assert sink.verify()
    sink.close()
    sink.close()  # idempotent


def test_concurrent_appends_form_one_chain(sinks: SinkBackend, tmp_path: Path) -> None:
    """Appends issued together from many tasks form one intact chain in call order."""
    sink = sinks.open(tmp_path)

    async def go() -> list[list[AuditRow]]:
        futures = [sink.append([entry(i, turn=f"t{i % 4}"), entry(i + 100)]) for i in range(40)]
        return await asyncio.gather(*futures)

    batches = asyncio.run(go())
    assert [row.index for batch in batches for row in batch] == list(range(80))
    assert sink.verify()
    sink.close()


def test_reopened_sink_continues_the_chain(sinks: SinkBackend, tmp_path: Path) -> None:
    """A sink opened on an existing log appends after its last row."""
    first = sinks.open(tmp_path)
    write(first, 3)
    first.close()
    second = sinks.open(tmp_path)
    [row] = append(second, [entry(9)])
    assert row.index == 3
    assert row.prev_hash == second.rows()[2].hash
    assert second.verify()
    second.close()


def test_verify_with_a_saved_head_detects_a_rewritten_tail(
    sinks: SinkBackend, tmp_path: Path
) -> None:
    """A head saved elsewhere catches truncation even when the stored head was rewritten."""
    sink = sinks.open(tmp_path)
    write(sink, 4)
    saved = sink.head()
    sink.close()
    if sinks.name != "jsonl":
        sinks.sql(tmp_path, "DELETE FROM audit_rows WHERE idx = 3")
        sinks.sql(tmp_path, "UPDATE audit_head SET count = 3, hash = (SELECT hash FROM "
                  "audit_rows WHERE idx = 2)")
    else:
        path = tmp_path / "audit.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:3]))
        (tmp_path / "audit.jsonl.head").write_text(json.dumps(
            {"count": 3, "hash": json.loads(lines[2])["hash"]}))
    reopened = sinks.open(tmp_path)
    assert reopened.verify()  # consistent on its own
    assert reopened.verify(head=saved).first_bad_row == 3
    reopened.close()


def test_truncated_log_stays_detectable_after_more_appends(
    sinks: SinkBackend, tmp_path: Path
) -> None:
    """Rows appended after the tail was cut do not hide the cut."""
    sink = sinks.open(tmp_path)
    write(sink, 4)
    sink.close()
    if sinks.name != "jsonl":
        sinks.sql(tmp_path, "DELETE FROM audit_rows WHERE idx = 3")
    else:
        path = tmp_path / "audit.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
    reopened = sinks.open(tmp_path)
    assert reopened.verify().first_bad_row == 3
    append(reopened, [entry(7)])
    assert reopened.verify().first_bad_row == 3
    reopened.close()


def test_a_torn_acknowledged_row_stays_reported_after_the_repair(tmp_path: Path) -> None:
    """A row cut after the head counted it is not a crash's torn tail: it stays reported.

    (The tail is cut and recorded in a repair row, so rows() no longer raises; the
    head still counts the lost row, so verify() keeps naming it after more appends.)
    """
    sink = JsonlAuditSink(tmp_path / "audit.jsonl", synchronous="normal")
    write(sink, 3)
    sink.close()
    path = tmp_path / "audit.jsonl"
    path.write_bytes(path.read_bytes()[:-20])
    reopened = JsonlAuditSink(path, synchronous="normal")
    assert reopened.verify().first_bad_row == 2
    rows = reopened.rows()
    assert [(r.index, r.entry.kind) for r in rows] == [(0, "tool_call"), (1, "tool_call"),
                                                       (3, "repair")]
    [row] = append(reopened, [entry(5)])
    assert row.index == 4
    assert reopened.verify().first_bad_row == 2
    reopened.close()


@pytest.mark.parametrize("factory", [SqliteAuditSink, JsonlAuditSink], ids=["sqlite", "jsonl"])
@pytest.mark.parametrize(
    "kwargs",
    [{"path": ""}, {"path": 3}, {"path": "x", "synchronous": "sometimes"}],
    ids=["empty-path", "int-path", "bad-synchronous"],
)
def test_bad_options_raise_invalid_middleware_config(
    factory: Callable[..., Sink], kwargs: dict[str, object]
) -> None:
    """Bad sink options raise InvalidMiddlewareConfigError at construction."""
    with pytest.raises(InvalidMiddlewareConfigError):
        factory(**kwargs)


def test_sqlite_sink_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    """A non-SQLite file raises InvalidMiddlewareConfigError naming it."""
    path = tmp_path / "plain.txt"
    path.write_text("not sqlite at all " * 200)
    with pytest.raises(InvalidMiddlewareConfigError, match="plain"):
        SqliteAuditSink(path)


def test_jsonl_sink_refuses_an_unopenable_path(tmp_path: Path) -> None:
    """A path that cannot be opened for appending raises InvalidMiddlewareConfigError."""
    with pytest.raises(InvalidMiddlewareConfigError, match="cannot open"):
        JsonlAuditSink(tmp_path)  # a directory


# -- tampering ---------------------------------------------------------------------------------
_COLUMNS = (
    "kind", "turn_id", "conversation_id", "recorded_at", "call_id", "tool", "checksum", "args",
    "is_error", "duration_ms", "decision", "policy", "reason", "status", "error", "input",
    "ran", "decisions", "prev_hash", "hash",
)
_FIELDS = ", ".join(_COLUMNS)
_ASSIGN = ", ".join(f"{c} = ?" for c in _COLUMNS)


def _tamper_sql(sinks: SinkBackend, folder: Path, op: str, k: int) -> None:
    def run(statement: str, *params: object) -> list[tuple[object, ...]]:
        return sinks.sql(folder, statement, params)

    def row(i: int) -> tuple[object, ...]:
        [found] = run(f"SELECT {_FIELDS} FROM audit_rows WHERE idx = ?", i)
        return tuple(found)

    if op == "edit":
        run("UPDATE audit_rows SET args = '{\"q\":\"forged\"}' WHERE idx = ?", k)
    elif op == "flip":
        run("UPDATE audit_rows SET is_error = 1 - is_error WHERE idx = ?", k)
    elif op == "ran":
        run("UPDATE audit_rows SET ran = 1 - ran WHERE idx = ?", k)
    elif op == "undecide":  # a row without its decisions reads as a row written before them
        run("UPDATE audit_rows SET decisions = NULL WHERE idx = ?", k)
    elif op == "delete":  # and renumber the rows after it, as a forger would
        run("DELETE FROM audit_rows WHERE idx = ?", k)
        run("UPDATE audit_rows SET idx = -(idx - 1) WHERE idx > ?", k)
        run("UPDATE audit_rows SET idx = -idx WHERE idx < 0")
    elif op == "swap":
        first, second = row(k), row(k + 1)
        run(f"UPDATE audit_rows SET {_ASSIGN} WHERE idx = ?", *second, k)
        run(f"UPDATE audit_rows SET {_ASSIGN} WHERE idx = ?", *first, k + 1)
    elif op == "insert":
        forged = list(row(k))
        forged[_COLUMNS.index("reason")] = b"forged reason" if sinks.name == "postgres" else (
            "forged reason"
        )
        run("UPDATE audit_rows SET idx = -(idx + 1) WHERE idx >= ?", k)
        run("UPDATE audit_rows SET idx = -idx WHERE idx < 0")
        marks = ", ".join("?" * (len(_COLUMNS) + 1))
        run(f"INSERT INTO audit_rows (idx, {_FIELDS}) VALUES ({marks})", k, *forged)


def _tamper_jsonl(path: Path, op: str, k: int) -> None:
    lines = path.read_text().splitlines(keepends=True)
    if op in ("edit", "flip", "ran", "undecide"):
        row = json.loads(lines[k])
        if op == "edit":
            row["args"] = '{"q":"forged"}'
        elif op == "flip":
            row["is_error"] = not row["is_error"]
        elif op == "ran":
            row["ran"] = not row["ran"]
        else:
            del row["decisions"]
        lines[k] = json.dumps(row, separators=(",", ":")) + "\n"
    elif op == "delete":
        del lines[k]
    elif op == "swap":
        lines[k], lines[k + 1] = lines[k + 1], lines[k]
    elif op == "insert":
        row = json.loads(lines[k])
        row["reason"] = "forged reason"
        lines.insert(k, json.dumps(row, separators=(",", ":")) + "\n")
    path.write_text("".join(lines))


@st.composite
def tampering(draw: st.DrawFn) -> tuple[int, str, int]:
    n = draw(st.integers(min_value=1, max_value=7))
    op = draw(st.sampled_from(["edit", "flip", "ran", "undecide", "delete", "swap", "insert"]))
    last = n - 2 if op == "swap" else n - 1
    if last < 0:
        op, last = "edit", n - 1
    return n, op, draw(st.integers(min_value=0, max_value=last))


@pytest.mark.parametrize("key", [None, AuditKey(b"k" * 32)], ids=["unkeyed", "keyed"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=tampering())
def test_any_edit_delete_reorder_or_insert_is_reported_at_its_row(
    sinks: SinkBackend,
    tmp_path_factory: pytest.TempPathFactory,
    key: AuditKey | None,
    case: tuple[int, str, int],
) -> None:
    """Editing (a field, ``ran``, dropping ``decisions``), deleting, swapping or inserting row k
    makes verify() return exactly k, in an unkeyed and in a keyed chain."""
    n, op, k = case
    folder = tmp_path_factory.mktemp("audit")
    sink = sinks.open(folder, key=key)
    write(sink, n)
    assert sink.verify()
    sink.close()
    if sinks.name != "jsonl":
        _tamper_sql(sinks, folder, op, k)
    else:
        _tamper_jsonl(folder / "audit.jsonl", op, k)
    reopened = sinks.open(folder, key=key)
    try:
        assert reopened.verify().first_bad_row == k, (op, k, n)
    finally:
        reopened.close()


@pytest.mark.parametrize("store_first", [True, False], ids=["store-first", "sink-first"])
async def test_store_and_audit_sink_can_share_one_file(tmp_path: Path, store_first: bool) -> None:
    """A SqliteStore and a SqliteAuditSink on the same file each keep their own schema."""
    path = tmp_path / "shared.sqlite"
    if store_first:
        SqliteStore(path).close()
    sink = SqliteAuditSink(path, synchronous="normal")
    store = SqliteStore(path)
    await sink.append([entry(0)])
    call = ToolCall.completed(id="a", tool="x", args={}, results="r")
    await store.save_tool_call(None, "t", call)
    assert [c.id for c in await store.tool_calls_for_turn("t")] == ["a"]
    assert sink.verify()
    assert len(sink.rows()) == 1
    await store.aclose()
    sink.close()


def test_sqlite_sink_refuses_a_newer_audit_schema(tmp_path: Path) -> None:
    """A log written by a newer audit schema raises InvalidMiddlewareConfigError."""
    path = tmp_path / "audit.sqlite"
    SqliteAuditSink(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO audit_migrations VALUES (7, 'future')")
    with pytest.raises(InvalidMiddlewareConfigError, match="version 7"):
        SqliteAuditSink(path)


async def test_two_sinks_on_one_file_keep_every_row(sinks: SinkBackend, tmp_path: Path) -> None:
    """Two sinks on one log (two runners' AuditLogs) interleave into one intact chain."""
    first, second = sinks.open(tmp_path), sinks.open(tmp_path)
    written = [await sink.append([entry(i)]) for i, sink in enumerate([first, second] * 3)]
    assert [row.index for rows in written for row in rows] == list(range(6))
    assert [row.call_id for row in (r.entry for r in first.rows())] == [
        f"call-{i}" for i in range(6)
    ]
    assert first.verify()
    assert second.verify()
    first.close()
    second.close()


def test_verify_with_a_saved_head_detects_a_rewritten_last_row(
    sinks: SinkBackend, tmp_path: Path
) -> None:
    """A saved head catches a last row replaced by a consistent forgery (count unchanged)."""
    sink = sinks.open(tmp_path)
    write(sink, 3)
    saved = sink.head()
    sink.close()
    if sinks.name != "jsonl":
        sinks.sql(tmp_path, "DELETE FROM audit_rows WHERE idx = 2")
        sinks.sql(tmp_path, "UPDATE audit_head SET count = 2, hash = (SELECT hash FROM "
                  "audit_rows WHERE idx = 1)")
    else:
        path = tmp_path / "audit.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
        (tmp_path / "audit.jsonl.head").unlink()
    forger = sinks.open(tmp_path)
    append(forger, [entry(99)])  # a different row 2, correctly chained
    assert forger.verify()  # consistent on its own
    assert forger.verify(head=saved).first_bad_row == 2
    forger.close()


def test_a_row_appended_after_a_torn_line_is_readable(tmp_path: Path) -> None:
    """Reopening ends a torn last line first, so the next row is a line of its own."""
    path = tmp_path / "audit.jsonl"
    sink = JsonlAuditSink(path, synchronous="normal")
    write(sink, 2)
    sink.close()
    path.write_bytes(path.read_bytes()[:-20])
    reopened = JsonlAuditSink(path, synchronous="normal")
    [row] = append(reopened, [entry(5)])
    reopened.close()
    last = json.loads(path.read_text().splitlines()[-1])
    assert (last["index"], last["hash"], last["call_id"]) == (row.index, row.hash, "call-5")


@pytest.mark.parametrize("other", [" ✓", ""], ids=["with-other-non-ascii", "ascii-otherwise"])
def test_text_with_lone_surrogates_is_kept_exactly(
    sinks: SinkBackend, tmp_path: Path, other: str
) -> None:
    """A row whose text holds lone surrogates (undecodable file names) is written and verifies,
    whether or not its other text is ASCII (the escaped surrogate is)."""
    sink = sinks.open(tmp_path)
    odd = AuditEntry(
        kind="turn",
        turn_id="t1",
        conversation_id="c\udcfe",
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC),
        input=f"list report-\udcff.txt{other}",
        error="E_X: bad \ud800",
    )
    call = AuditEntry(
        kind="tool_call",
        turn_id="t1",
        conversation_id=None,
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC),
        call_id="s\udc80",
        tool="sea\ud800rch",
        decision="invalid",
        ran=False,
        decisions='[{"reason":"bad \\ud800"}]',
    )
    rows = append(sink, [odd, call])
    assert sink.rows() == rows
    assert [r.entry for r in sink.rows()] == [odd, call]
    assert sink.verify()
    sink.close()
