"""How the built-in audit sinks write: the chain's hash text, chains written before this
version, appends that never wait on the event loop, group commit, failures and kills."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import fcntl
import gc
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.audit import (
    AuditEntry,
    AuditHead,
    AuditRow,
    JsonlAuditSink,
    SqliteAuditSink,
    _jsonl,
    _writer,
)
from middleware.audit._chain import (
    DECISIONS,
    GENESIS_HASH,
    entry_to_fields,
    hashed_fields,
    row_hash,
)
from middleware.audit._seal import (
    canonical_row,
    iso_text,
    new_head,
    new_row,
    seal,
    seal_fields,
)
from pipeline import canonical_json

from ._old_rows import old_fields

ROOT = Path(__file__).resolve().parents[2]


_DST_ZONES = sorted({"Europe/Paris", "America/New_York"} & zoneinfo.available_timezones())


def _zone(name: str) -> tzinfo:
    return zoneinfo.ZoneInfo(name)
Sink = SqliteAuditSink | JsonlAuditSink
KINDS = ("sqlite", "jsonl")


def open_sink(kind: str, folder: Path, synchronous: str = "normal") -> Sink:
    if kind == "sqlite":
        return SqliteAuditSink(folder / "audit.sqlite", synchronous=synchronous)  # type: ignore[arg-type]
    return JsonlAuditSink(folder / "audit.jsonl", synchronous=synchronous)  # type: ignore[arg-type]


def entry(i: int) -> AuditEntry:
    return AuditEntry(
        kind="tool_call",
        turn_id=f"t{i // 3}",
        conversation_id="c",
        recorded_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=i),
        call_id=f"call-{i}",
        tool="search",
        checksum=f"{i:064x}",
        args=json.dumps({"q": i}),
        is_error=i % 4 == 0,
        duration_ms=i * 0.75,
        decision="allowed",
    )


def call_ids(sink: Sink) -> list[str | None]:
    return [row.entry.call_id for row in sink.rows()]


# -- the hash text ------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=()), max_size=12)
_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 1e-7, 1e-5, 1.5e-4, 1e16, 1e21, 1e22, 123456.789]),
    st.integers(-(2**60), 2**60),
)


@st.composite
def entries(draw: st.DrawFn) -> AuditEntry:
    maybe = st.none() | _text
    offset = draw(st.integers(-14 * 60, 14 * 60))
    return AuditEntry(
        kind=draw(st.sampled_from(["tool_call", "amended", "deleted", "tool", "turn", "repair"])),
        turn_id=draw(_text),
        conversation_id=draw(maybe),
        recorded_at=datetime(2025, 1, 1, 12, 30, 15, draw(st.integers(0, 999_999)),
                             tzinfo=timezone(timedelta(minutes=offset))),
        call_id=draw(maybe),
        tool=draw(maybe),
        checksum=draw(maybe),
        args=draw(maybe),
        is_error=draw(st.booleans()),
        duration_ms=draw(st.none() | _floats),
        decision=draw(st.none() | st.sampled_from(DECISIONS)),
        policy=draw(maybe),
        reason=draw(maybe),
        status=draw(st.none() | st.sampled_from(["completed", "failed", "aborted"])),
        error=draw(maybe),
        input=draw(maybe),
        ran=draw(st.none() | st.booleans()),
        decisions=draw(maybe),
    )


@settings(max_examples=400, deadline=None)
@given(entries(), st.integers(0, 2**60), st.text(max_size=70) | st.just(GENESIS_HASH))
def test_the_hash_text_is_the_canonical_json_of_the_row(
    e: AuditEntry, index: int, prev_hash: str
) -> None:
    """Built once, fast, the text a row's hash is taken of is still exactly its definition: the
    canonical JSON of its fields, ``ran`` and ``decisions`` only when set."""
    expected = canonical_json({**hashed_fields(e), "index": index, "prev_hash": prev_hash})
    assert canonical_row(e, index, prev_hash) == expected.encode("utf-8")
    assert canonical_row(e, index, prev_hash, e.recorded_at.isoformat()) == expected.encode()


_odd = st.one_of(
    st.tuples(
        st.sampled_from(["allowed", 'odd "word"\n', "", 7, None, 2.0]),
        st.sampled_from(["kind", "decision", "status"]),
    ),
    st.tuples(st.sampled_from([0, 1, 7, 2.0]), st.sampled_from(["is_error", "ran"])),  # int(...)
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(entries(), max_size=6),
    st.integers(0, 2**53 - 7) | st.integers(2**53 - 3, 2**53 + 3),
    st.text(max_size=70) | st.just(GENESIS_HASH),
    st.lists(_odd, max_size=3),
    st.booleans(),
)
def test_a_sinks_rows_and_stored_fields_are_the_definitions_whatever_the_entries_hold(
    batch: list[AuditEntry], count: int, prev_hash: str, odd: list[tuple[object, str]],
    stamp: bool,
) -> None:
    """The rows a sink builds in one pass (every field read once) are `seal`'s, hash for hash,
    and the values it stores are each row's fields: for surrogates, odd floats, indexes past
    JavaScript's safe integers and fields of the wrong type alike."""
    for value, name in odd:
        if batch:
            batch[0] = dataclasses.replace(batch[0], **{name: value})  # type: ignore[arg-type]
    if stamp and batch:  # a datetime whose text needs escaping
        at = _Stamp.fromisoformat(batch[-1].recorded_at.isoformat())
        batch[-1] = dataclasses.replace(batch[-1], recorded_at=at)
    head = AuditHead(count, prev_hash)
    rows, values, size, ascii_only = seal_fields(batch, head)
    assert rows == seal(batch, head)
    texts = [canonical_row(row.entry, row.index, row.prev_hash) for row in rows]
    assert size == sum(len(text) for text in texts)
    # "plain" is the sink's cheap path: only ever claimed for ASCII texts (a row of an unusual
    # type or with an escaped surrogate takes the careful path even when its text is ASCII)
    assert not ascii_only or all(text.isascii() for text in texts)
    for row, stored in zip(rows, values, strict=True):
        fields = entry_to_fields(row.entry)
        fields["is_error"] = int(fields["is_error"])
        if fields["ran"] is not None:
            fields["ran"] = int(fields["ran"])
        assert stored == (row.index, *fields.values(), row.prev_hash, row.hash)


class _Stamp(datetime):
    """A datetime subclass whose text is its own: never taken from the last second's cache."""

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return 'stamp "\\' + super().isoformat(sep, timespec)


_zones = st.one_of(
    st.none(),
    st.just(UTC),
    st.builds(
        lambda m, s, us: timezone(timedelta(minutes=m, seconds=s, microseconds=us)),
        st.integers(-23 * 60, 23 * 60),
        st.sampled_from([0, 0, 15]),
        st.sampled_from([0, 0, 250]),
    ),
    # zones with DST, where the system has their data (tzdata)
    st.sampled_from(_DST_ZONES).map(_zone) if _DST_ZONES else st.nothing(),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=datetime(1, 1, 1, 0, 0, 2), max_value=datetime(9999, 12, 31)),
            st.integers(-2, 2),
            st.sampled_from([0, 1, 999_999]) | st.integers(0, 999_999),
            _zones,
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_a_rows_recorded_at_text_is_its_isoformat_whatever_came_before(
    stamps: list[tuple[datetime, int, int, object, bool]],
) -> None:
    """Times in one second share their text up to the second: each is still its own
    ``isoformat()``, across seconds, offsets, naive times, zones with DST and subclasses."""
    for base, step, micro, zone, subclass in stamps:
        at = base.replace(microsecond=micro, tzinfo=zone) + timedelta(seconds=step)  # type: ignore[arg-type]
        if subclass:
            at = _Stamp.fromisoformat(at.isoformat())
        assert iso_text(at) == at.isoformat()
        assert iso_text(at.replace(microsecond=0)) == at.replace(microsecond=0).isoformat()


class _Word(str, enum.Enum):  # noqa: UP042 - its str() is not its value: the hard case
    ALLOWED = "allowed"
    ODD = 'odd "word"\n'


@settings(max_examples=200, deadline=None)
@given(
    entries(),
    st.sampled_from([*DECISIONS, "tool_call", "turn", "completed", ""]) | _text,
    st.sampled_from([_Word.ALLOWED, _Word.ODD, 7, None]),
)
def test_the_hash_text_of_odd_kinds_decisions_and_statuses_is_still_the_definition(
    e: AuditEntry, word: str, odd: object
) -> None:
    """``kind``, ``decision`` and ``status`` are looked up by value, not trusted: any text, a
    ``str`` enum (written by value) or a value of the wrong type gives the definition's text."""
    for value in (word, odd):
        changed = dataclasses.replace(e, kind=value, decision=value, status=value)  # type: ignore[arg-type]
        expected = canonical_json({**hashed_fields(changed), "index": 3, "prev_hash": "p"})
        assert canonical_row(changed, 3, "p") == expected.encode("utf-8")


@given(entries(), st.integers(0, 2**53), st.text(max_size=70), st.text(max_size=70))
def test_a_sinks_new_row_and_head_are_the_ones_their_fields_make(
    e: AuditEntry, index: int, prev_hash: str, digest: str
) -> None:
    """A row built by ``new_row`` (and the head after it, by ``new_head``) equals, hashes, prints
    and stays frozen as the dataclass's own."""
    row, made = new_row(index, e, prev_hash, digest), AuditRow(index, e, prev_hash, digest)
    assert type(row) is AuditRow
    assert row == made
    assert hash(row) == hash(made)
    assert repr(row) == repr(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.hash = "edited"  # type: ignore[misc]
    head, expected = new_head(row), AuditHead(index + 1, digest)
    assert type(head) is AuditHead
    assert head == expected
    assert hash(head) == hash(expected)
    assert repr(head) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        head.count = 0  # type: ignore[misc]


# -- chains written before this version ----------------------------------------------------------


def _old_jsonl(path: Path, count: int) -> list[str]:
    """Write a log exactly as the sink wrote it before (key order, head record, two files)."""
    prev, lines = GENESIS_HASH, []
    hashes = []
    for i in range(count):
        fields = old_fields(entry(i))
        digest = row_hash(i, fields, prev)
        fields.update(index=i, prev_hash=prev, hash=digest)
        lines.append(json.dumps(fields, ensure_ascii=False, separators=(",", ":")) + "\n")
        prev = digest
        hashes.append(digest)
    path.write_text("".join(lines), encoding="utf-8")
    record = json.dumps({"count": count, "hash": prev}).encode()
    Path(f"{path}.head").write_bytes(record.ljust(127) + b"\n")
    return hashes


def _old_sqlite(path: Path, count: int) -> list[str]:
    """Write a database as the sink wrote it before (schema version 1, head row replaced)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE audit_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    conn.execute(
        "CREATE TABLE audit_rows (idx INTEGER PRIMARY KEY, kind TEXT, turn_id TEXT, "
        "conversation_id TEXT, recorded_at TEXT, call_id TEXT, tool TEXT, checksum TEXT, "
        "args TEXT, is_error, duration_ms, decision TEXT, policy TEXT, reason TEXT, status TEXT, "
        "error TEXT, input TEXT, prev_hash TEXT, hash TEXT)"
    )
    conn.execute(
        "CREATE TABLE audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), "
        "count INTEGER NOT NULL, hash TEXT NOT NULL)"
    )
    conn.execute("INSERT INTO audit_migrations VALUES (1, datetime('now'))")
    prev, hashes = GENESIS_HASH, []
    for i in range(count):
        fields = old_fields(entry(i))
        digest = row_hash(i, fields, prev)
        fields["is_error"] = int(fields["is_error"])
        conn.execute(
            "INSERT INTO audit_rows VALUES (?, " + ", ".join("?" * 16) + ", ?, ?)",
            (i, *fields.values(), prev, digest),
        )
        conn.execute("INSERT OR REPLACE INTO audit_head VALUES (1, ?, ?)", (i + 1, digest))
        prev = digest
        hashes.append(digest)
    conn.close()
    return hashes


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synchronous", ["full", "normal"])
async def test_a_chain_written_before_this_version_verifies_and_goes_on(
    kind: str, synchronous: str, tmp_path: Path
) -> None:
    """Old files keep verifying, and new rows chain after their last row."""
    old = (
        _old_sqlite(tmp_path / "audit.sqlite", 5) if kind == "sqlite"
        else _old_jsonl(tmp_path / "audit.jsonl", 5)
    )
    sink = open_sink(kind, tmp_path, synchronous)
    try:
        assert sink.verify()
        assert sink.head() == AuditHead(5, old[-1])
        assert [row.hash for row in sink.rows()] == old
        rows = await sink.append([entry(5), entry(6)])
        assert [(r.index, r.prev_hash) for r in rows] == [(5, old[-1]), (6, rows[0].hash)]
        assert sink.verify()
        assert call_ids(sink) == [f"call-{i}" for i in range(7)]
    finally:
        sink.close()
    reopened = open_sink(kind, tmp_path, synchronous)
    assert reopened.verify()
    assert reopened.head() == AuditHead(7, rows[-1].hash)
    reopened.close()


# -- never waiting on the event loop -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_normal_append_is_written_before_append_returns(kind: str, tmp_path: Path) -> None:
    """With nothing to wait for, the row is written at once: no thread hop to await."""
    sink = open_sink(kind, tmp_path)
    try:
        pending = sink.append([entry(0)])
        assert pending.done()
        if kind == "sqlite":
            with sqlite3.connect(tmp_path / "audit.sqlite") as other:
                assert other.execute("SELECT call_id, idx FROM audit_rows").fetchall() == [
                    ("call-0", 0),
                    (None, 1),  # the head row
                ]
        else:
            assert b'"call_id":"call-0"' in (tmp_path / "audit.jsonl").read_bytes()
        assert [r.index for r in await pending] == [0]
    finally:
        sink.close()


async def test_a_full_jsonl_append_syncs_on_the_writer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fdatasync`` (milliseconds on a busy disk) never runs on the event loop's thread."""
    threads: list[int] = []
    real = _jsonl._sync

    def sync(fd: int) -> None:
        threads.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(_jsonl, "_sync", sync)
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        pending = sink.append([entry(0)])
        assert not pending.done()
        await pending
        await asyncio.gather(*(sink.append([entry(i)]) for i in range(1, 4)))
        assert threads
        assert threading.get_ident() not in threads
        assert sink.verify()
    finally:
        sink.close()


async def test_a_full_sqlite_append_commits_on_the_writer_thread(tmp_path: Path) -> None:
    """A ``synchronous=FULL`` commit (an fsync) is never made on the event loop's thread."""
    sink = SqliteAuditSink(tmp_path / "audit.sqlite")
    try:
        pending = sink.append([entry(0)])
        assert not pending.done()
        assert [r.index for r in await pending] == [0]
        assert sink.verify()
    finally:
        sink.close()


def _hold_lock(kind: str, folder: Path) -> Callable[[], None]:
    """Take the log's write lock as another writer would; return its release."""
    if kind == "sqlite":
        other = sqlite3.connect(folder / "audit.sqlite", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")

        def release_sqlite() -> None:
            other.execute("COMMIT")
            other.close()

        return release_sqlite
    handle = open(f"{folder / 'audit.jsonl'}.head", "rb")  # noqa: SIM115 - closed by release
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)

    def release_jsonl() -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()

    return release_jsonl


@pytest.mark.parametrize("kind", KINDS)
async def test_a_normal_append_never_waits_for_another_writers_lock(
    kind: str, tmp_path: Path
) -> None:
    """While another writer holds the lock, appends wait off the loop, in order, then land."""
    sink = open_sink(kind, tmp_path)
    try:
        await sink.append([entry(0)])
        release = _hold_lock(kind, tmp_path)
        first = sink.append([entry(1)])
        second = sink.append([entry(2)])  # must not overtake the first
        ticks = 0
        for _ in range(20):  # the loop keeps running while the appends wait
            await asyncio.sleep(0.005)
            ticks += 1
        assert ticks == 20
        assert not first.done()
        assert not second.done()
        release()
        rows = await asyncio.wait_for(asyncio.gather(first, second), 30)
        assert [[r.index for r in group] for group in rows] == [[1], [2]]
        third = await sink.append([entry(3)])  # and the loop writes at once again
        assert third[0].index == 3
        assert call_ids(sink) == [f"call-{i}" for i in range(4)]
        assert sink.verify()
    finally:
        sink.close()


# -- group commit --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synchronous", ["full", "normal"])
async def test_concurrent_turns_appends_are_chained_in_call_order(
    kind: str, synchronous: str, tmp_path: Path
) -> None:
    """Appends from many tasks at once: one row each, in the order the appends were made."""
    sink = open_sink(kind, tmp_path, synchronous)
    order: list[int] = []

    async def turn(i: int) -> list[AuditRow]:
        await asyncio.sleep(0)
        order.append(i)
        return await sink.append([entry(i)])

    try:
        for start in (0, 40):
            written = await asyncio.gather(*(turn(i) for i in range(start, start + 40)))
            assert all(len(rows) == 1 for rows in written)
        assert call_ids(sink) == [f"call-{i}" for i in order]
        assert [r.index for r in sink.rows()] == list(range(80))
        assert sink.verify()
    finally:
        sink.close()


async def test_concurrent_appends_in_one_loop_turn_share_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first append of a loop turn is written at once; the other tasks' appends of that
    turn are written together when the loop gets control back."""
    writes: list[int] = []
    real = _jsonl._write_all

    def counted(fd: int, data: bytes) -> None:
        writes.append(data.count(b"\n"))
        real(fd, data)

    monkeypatch.setattr(_jsonl, "_write_all", counted)
    sink = JsonlAuditSink(tmp_path / "audit.jsonl", synchronous="normal")

    async def turn(i: int) -> None:
        await sink.append([entry(i)])

    try:
        await asyncio.gather(*(turn(i) for i in range(30)))
        assert writes == [1, 29]
        assert call_ids(sink) == [f"call-{i}" for i in range(30)]
        assert sink.verify()
    finally:
        sink.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_rows_read_in_the_same_loop_turn_include_every_append_made(
    kind: str, tmp_path: Path
) -> None:
    """Appends gathered for a group commit are written before a synchronous read sees the log."""
    sink = open_sink(kind, tmp_path)
    seen: list[int] = []

    async def turn(i: int) -> None:
        pending = sink.append([entry(i)])
        seen.append(len(sink.rows()))
        await pending

    try:
        await asyncio.gather(*(turn(i) for i in range(6)))
        assert seen == [1, 2, 3, 4, 5, 6]
        assert sink.head().count == 6
        assert sink.verify()
    finally:
        sink.close()


async def test_a_read_from_another_thread_waits_for_the_gathered_appends(tmp_path: Path) -> None:
    """A group gathered on the loop, read from another thread: written first, settled on the
    loop (never from the reading thread)."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl", synchronous="normal")
    counts: list[int] = []

    async def turn(i: int) -> list[AuditRow]:
        return await sink.append([entry(i)])

    try:
        tasks = [asyncio.ensure_future(turn(i)) for i in range(4)]
        await asyncio.sleep(0)  # every task has appended; three wait for their group
        reader = threading.Thread(target=lambda: counts.append(len(sink.rows())))
        reader.start()
        await asyncio.to_thread(reader.join)
        written = await asyncio.gather(*tasks)
        assert counts == [4]
        assert [rows[0].index for rows in written] == [0, 1, 2, 3]
        assert sink.verify()
    finally:
        sink.close()


async def test_a_head_rewritten_under_an_open_sqlite_sink_is_followed_as_on_opening(
    tmp_path: Path,
) -> None:
    """The head kept in memory never overrides the file: when another connection rewrote the
    stored head (here: cut the last row and the head with it), the next append chains after
    what the file holds, exactly as a freshly opened sink would, and a saved head still
    catches the cut."""
    sink = SqliteAuditSink(tmp_path / "audit.sqlite", synchronous="normal")
    try:
        for i in range(3):
            await sink.append([entry(i)])
        saved = sink.head()
        with sqlite3.connect(tmp_path / "audit.sqlite") as other:
            other.execute("DELETE FROM audit_rows WHERE idx = 2")
            other.execute(  # the head row (the last one) moves back after row 1
                "UPDATE audit_rows SET idx = 2, head_count = 2, "
                "hash = (SELECT hash FROM audit_rows WHERE idx = 1) WHERE idx = 3"
            )
        rows = await sink.append([entry(3)])
        assert rows[0].index == 2
        assert call_ids(sink) == ["call-0", "call-1", "call-3"]
        assert sink.verify()
        assert sink.verify(head=saved).first_bad_row == 2
    finally:
        sink.close()


# -- the writer thread ---------------------------------------------------------------------------


def _writer_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synchronous", ["full", "normal"])
async def test_closing_a_sink_ends_its_writer_thread(
    kind: str, synchronous: str, tmp_path: Path
) -> None:
    """A sink runs one writer thread, and close() waits for it to end: none is left behind."""
    before = len(_writer_threads("loopware-audit"))
    sink = open_sink(kind, tmp_path, synchronous)
    await sink.append([entry(0)])
    assert len(_writer_threads("loopware-audit")) == before + 1
    sink.close()
    assert len(_writer_threads("loopware-audit")) == before


def test_a_writer_nobody_closed_ends_its_thread_when_collected() -> None:
    """A ChainWriter dropped without close() does not leave its thread waiting forever."""
    done: list[int] = []
    writer = _writer.ChainWriter("loopware-test-dropped", lambda entries: [])
    writer.submit(lambda: done.append(1))
    thread = _writer_threads("loopware-test-dropped")[0]
    del writer
    gc.collect()
    thread.join(10)
    assert not thread.is_alive()
    assert done == [1]  # what was queued still ran


_EXIT_WITHOUT_CLOSE = """
import asyncio, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.middleware.test_audit_writer import entry, open_sink

sink = open_sink({kind!r}, Path({folder!r}), "full")

async def main() -> None:
    for i in range(20):  # queued for the writer thread (a sync each); nobody awaits them
        sink.append([entry(i)])

asyncio.run(main())
# no close(): the interpreter exits with the append queued
"""


@pytest.mark.parametrize("kind", KINDS)
def test_an_append_queued_when_the_interpreter_exits_is_written(kind: str, tmp_path: Path) -> None:
    """At exit, the writer thread finishes what is queued (as a thread pool's worker would)."""
    script = _EXIT_WITHOUT_CLOSE.format(root=str(ROOT), kind=kind, folder=str(tmp_path))
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, timeout=120
    )
    assert child.returncode == 0, child.stderr.decode()
    sink = open_sink(kind, tmp_path, "full")
    try:
        assert call_ids(sink) == [f"call-{i}" for i in range(20)]
        assert sink.verify()
    finally:
        sink.close()


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize("synchronous", ["full", "normal"])
async def test_a_failed_write_fails_its_append_and_the_chain_goes_on(
    synchronous: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write cut short (a full disk) fails that append; the next one repairs and goes on."""
    real = _jsonl._write_all
    calls: list[bytes] = []

    def flaky(fd: int, data: bytes) -> None:
        calls.append(data)
        if len(calls) == 2:  # the second append's write
            real(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(_jsonl, "_write_all", flaky)
    sink = JsonlAuditSink(tmp_path / "audit.jsonl", synchronous=synchronous)  # type: ignore[arg-type]
    try:
        await sink.append([entry(0)])
        with pytest.raises(OSError, match="No space"):
            await sink.append([entry(1)])
        await sink.append([entry(2)])
        kinds = [(r.entry.kind, r.entry.call_id) for r in sink.rows()]
        assert kinds == [("tool_call", "call-0"), ("repair", None), ("tool_call", "call-2")]
        assert sink.verify()
    finally:
        sink.close()


async def test_a_normal_sqlite_sink_keeps_its_wal_bounded(tmp_path: Path) -> None:
    """Commits made on the loop's thread never checkpoint; the writer thread does, so the
    write-ahead log does not grow without end."""
    sink = SqliteAuditSink(tmp_path / "audit.sqlite", synchronous="normal")
    try:
        for i in range(6000):
            await sink.append([entry(i)])
        wal = (tmp_path / "audit.sqlite-wal").stat().st_size
        assert sink.verify()
        # Without checkpoints, 6,000 one-row commits leave 30 MB (1.2 pages of 4 KiB each).
        # With them the log restarts after each complete one: 5-10 MB here, the top when the
        # writer thread starts its checkpoint late (a busy process), so the margin is wide.
        assert wal < 16_000_000, wal
    finally:
        sink.close()


# -- several processes on one log ---------------------------------------------------------------

_PROCESSES, _APPENDS = 4, 40

_SHARE = """
import asyncio, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.middleware.test_audit_writer import entry, open_sink

async def main() -> None:
    sink = open_sink({kind!r}, Path({folder!r}), {synchronous!r})
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts appending at the same moment
    base = 1000 * {worker}
    for i in range({appends} // 2):  # one awaited row at a time (written at once, "normal")
        await sink.append([entry(base + i)])
    for start in range({appends} // 2, {appends}, 5):  # a few appends in flight at once
        await asyncio.gather(*(sink.append([entry(base + i)]) for i in range(start, start + 5)))
    sink.close()

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synchronous", ["full", "normal"])
async def test_processes_appending_to_one_log_at_once_form_one_chain(
    kind: str, synchronous: str, tmp_path: Path
) -> None:
    """Four OS processes appending to one file at once: every sink notices the others' rows
    (the fast path included), so the chain verifies with no row lost, doubled or reordered."""
    open_sink(kind, tmp_path, synchronous).close()  # the file exists before they race
    children = []
    for worker in range(_PROCESSES):
        script = _SHARE.format(root=str(ROOT), kind=kind, folder=str(tmp_path),
                               synchronous=synchronous, worker=worker, appends=_APPENDS)
        children.append(await asyncio.create_subprocess_exec(
            sys.executable, "-c", textwrap.dedent(script),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        ))
    for child in children:
        assert child.stdout is not None
        assert await child.stdout.readline() == b"ready\n"
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        await child.stdin.drain()
    for child in children:
        _, err = await asyncio.wait_for(child.communicate(), 120)
        assert child.returncode == 0, err.decode()
    sink = open_sink(kind, tmp_path, synchronous)
    try:
        assert sink.verify()
        rows = sink.rows()
        assert sink.head().count == len(rows) == _PROCESSES * _APPENDS
    finally:
        sink.close()
    ids = [str(row.entry.call_id) for row in rows]
    for worker in range(_PROCESSES):
        mine = [i for i in ids if int(i.removeprefix("call-")) // 1000 == worker]
        assert mine == [f"call-{1000 * worker + i}" for i in range(_APPENDS)]


# -- kills ---------------------------------------------------------------------------------------

_APPEND_UNTIL_KILLED = """
import asyncio, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.middleware.test_audit_writer import entry, open_sink

async def main() -> None:
    sink = open_sink({kind!r}, Path({folder!r}), {synchronous!r})
    i = 0
    while True:
        batch = [entry(i + k) for k in range(1 + i % 3)]
        await asyncio.gather(*(sink.append([e]) for e in batch))
        i += len(batch)
        print(i, flush=True)  # every row before i is acknowledged

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_every_acknowledged_row_survives_a_sigkill(
    kind: str, synchronous: str, tmp_path: Path
) -> None:
    """A writer SIGKILLed mid-stream: every row it saw acknowledged is there, and the log
    verifies (the head may lag behind the rows; a torn JSON Lines tail is repaired)."""
    script = _APPEND_UNTIL_KILLED.format(
        root=str(ROOT), kind=kind, folder=str(tmp_path), synchronous=synchronous
    )
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    acknowledged = 0
    try:
        for line in child.stdout:
            acknowledged = int(line)
            if acknowledged >= 60:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        rest, errors = child.communicate(timeout=60)
    for line in rest.split():
        acknowledged = int(line)
    assert child.returncode == -signal.SIGKILL, errors.decode()
    assert acknowledged >= 60, errors.decode()
    sink = open_sink(kind, tmp_path, synchronous)
    try:
        assert sink.verify()
        ids = [r.entry.call_id for r in sink.rows() if r.entry.kind == "tool_call"]
        assert ids[:acknowledged] == [f"call-{i}" for i in range(acknowledged)]
        rows = await_append(sink, entry(10_000))
        assert rows[0].index == sink.head().count - 1
        assert sink.verify()
    finally:
        sink.close()


def await_append(sink: Sink, e: AuditEntry) -> list[AuditRow]:
    async def go() -> list[AuditRow]:
        return await sink.append([e])

    return asyncio.run(go())
