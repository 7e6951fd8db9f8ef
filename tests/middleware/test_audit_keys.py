"""Keyed audit chains: what a forger without the key can no longer hide.

The `sinks` fixture runs the shared tests against every sink (JSON Lines, SQLite, PostgreSQL on
a throw-away server, ``tests/_pg.py``). The forger (``tests/middleware/_forger.py``) knows the
format, can read and write the log's storage, and has no key: it rewrites rows and recomputes
the chain (without a key, with a key of its own, or with the right key id in front of an
unkeyed hash), cuts the tail and deletes or rewrites the stored head, or edits one field. Every
one is found by ``verify()`` with the key, or refused when the sink opens (a head that is not
the key's: ``E_AUDIT_KEY_MISMATCH``), with no head saved elsewhere. Rolling the whole log back to
an earlier copy is found with an anchor (``tests/middleware/test_audit_anchors.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from middleware.audit import (
    AuditAnchorFile,
    AuditHead,
    AuditKey,
    AuditKeyError,
    AuditKeyMismatchError,
    JsonlAuditSink,
    SqliteAuditSink,
)
from pipeline.errors import InvalidMiddlewareConfigError

from ._forger import (
    KEY,
    OTHER,
    Forge,
    append,
    chain_from,
    edited,
    entry,
    found,
    logged,
    recomputed,
    store,
    write,
)
from ._sinks import Sink, SinkBackend

_BYTEA = {
    "turn_id", "conversation_id", "call_id", "tool", "checksum", "args", "policy", "reason",
    "error", "input", "decisions",
}


# -- keys --------------------------------------------------------------------------------------
def test_a_key_reads_the_same_from_bytes_the_environment_and_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AuditKey(secret)``, ``from_env`` and ``from_file`` (hex text) give the same key, and
    neither its repr nor its id shows the secret."""
    secret = os.urandom(32)
    monkeypatch.setenv("LOOPWARE_AUDIT_KEY", secret.hex())
    (tmp_path / "audit.key").write_text(secret.hex() + "\n")
    keys = [AuditKey(secret), AuditKey.from_env(), AuditKey.from_file(tmp_path / "audit.key")]
    assert keys[0] == keys[1] == keys[2]
    assert {k.id for k in keys} == {keys[0].id}
    assert len(keys[0].id) == 8
    assert repr(keys[0]) == f"AuditKey(id={keys[0].id!r})"
    assert secret.hex() not in repr(keys[0])
    assert secret.hex()[:8] != keys[0].id
    assert AuditKey(secret) != OTHER


@pytest.mark.parametrize(
    "load",
    [
        lambda p: AuditKey(b"short"),
        lambda p: AuditKey("00" * 32),  # type: ignore[arg-type]
        lambda p: AuditKey.from_env("LOOPWARE_TEST_UNSET_KEY"),
        lambda p: AuditKey.from_env("LOOPWARE_TEST_BAD_KEY"),
        lambda p: AuditKey.from_file(p / "missing.key"),
        lambda p: AuditKey.from_file(p / "short.key"),
        lambda p: AuditKey.from_file(p / "binary.key"),
    ],
    ids=["short-bytes", "text", "env-unset", "env-not-hex", "file-missing", "file-short",
         "file-binary"],
)
def test_a_bad_key_raises_E_AUDIT_KEY_without_showing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: Callable[[Path], AuditKey]
) -> None:
    """A key that is missing, not hex or shorter than 16 bytes raises `AuditKeyError`
    (an `InvalidMiddlewareConfigError`, ``E_AUDIT_KEY``); the message never holds the text."""
    monkeypatch.delenv("LOOPWARE_TEST_UNSET_KEY", raising=False)
    monkeypatch.setenv("LOOPWARE_TEST_BAD_KEY", "zz-secret-zz")
    (tmp_path / "short.key").write_text("abcdef12")
    (tmp_path / "binary.key").write_bytes(b"\xff\xfe-secret" * 4)
    with pytest.raises(AuditKeyError) as caught:
        load(tmp_path)
    assert caught.value.code == "E_AUDIT_KEY"
    assert isinstance(caught.value, InvalidMiddlewareConfigError)
    assert "secret" not in str(caught.value)
    assert "abcdef12" not in str(caught.value)


@pytest.mark.parametrize("factory", [SqliteAuditSink, JsonlAuditSink], ids=["sqlite", "jsonl"])
def test_a_sink_refuses_a_key_that_is_not_an_audit_key(
    tmp_path: Path, factory: Callable[..., Sink]
) -> None:
    """Raw bytes as ``key=`` raise `AuditKeyError` at construction (wrap them in AuditKey)."""
    with pytest.raises(AuditKeyError, match="AuditKey"):
        factory(tmp_path / "audit.log", key=b"0" * 32)


# -- keyed chains ------------------------------------------------------------------------------
def test_a_keyed_chain_verifies_reopens_and_goes_on(sinks: SinkBackend, tmp_path: Path) -> None:
    """Keyed rows carry the key id; a reopened keyed sink continues and verifies."""
    rows = logged(sinks, tmp_path, 3)
    assert all(r.hash.startswith(f"hmac-sha256:{KEY.id}:") for r in rows)
    assert rows[1].prev_hash == rows[0].hash
    sink = sinks.open(tmp_path, key=KEY)
    try:
        assert sink.head() == AuditHead(3, rows[-1].hash)
        [row] = asyncio.run(append(sink, [entry(3)]))
        assert (row.index, row.prev_hash) == (3, rows[-1].hash)
        assert sink.verify()
        assert sink.rows()[:3] == rows
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("written_with", "opened_with"),
    [(None, KEY), (KEY, None), (KEY, OTHER)],
    ids=["unkeyed-log-keyed-sink", "keyed-log-unkeyed-sink", "keyed-log-other-key"],
)
def test_a_sink_refuses_a_log_chained_in_another_mode_or_key(
    sinks: SinkBackend,
    tmp_path: Path,
    written_with: AuditKey | None,
    opened_with: AuditKey | None,
) -> None:
    """Opening a log with the wrong key (or none, or one for an unkeyed log) raises
    ``E_AUDIT_KEY_MISMATCH`` naming both key ids, before anything is written."""
    sink = sinks.open(tmp_path, key=written_with)
    write(sink, 2)
    sink.close()
    with pytest.raises(AuditKeyMismatchError) as caught:
        sinks.open(tmp_path, key=opened_with)
    assert caught.value.code == "E_AUDIT_KEY_MISMATCH"
    assert caught.value.expected == (None if opened_with is None else opened_with.id)
    assert caught.value.found == (None if written_with is None else written_with.id)
    again = sinks.open(tmp_path, key=written_with)
    try:
        assert again.verify()
        assert len(again.rows()) == 2
    finally:
        again.close()


def test_an_empty_log_takes_either_mode(sinks: SinkBackend, tmp_path: Path) -> None:
    """A log with no rows yet opens keyed or not, verifies either way, and keeps the mode of
    its first rows (a sealed head replaced by a shorter unkeyed one leaves no trace)."""
    for key in (None, KEY, OTHER, None):
        sink = sinks.open(tmp_path, key=key)
        assert sink.verify()
        sink.close()
    sink = sinks.open(tmp_path)
    write(sink, 2)
    assert sink.verify()
    sink.close()
    reopened = sinks.open(tmp_path)
    try:
        assert reopened.verify()
        assert reopened.head().count == 2
    finally:
        reopened.close()
    with pytest.raises(AuditKeyMismatchError):
        sinks.open(tmp_path, key=KEY)


# -- the tamper cases, each found with the key and no saved head -------------------------------
@pytest.mark.parametrize("how", ["unkeyed", "other-key"])
def test_a_rewrite_recomputed_without_the_key_is_refused_by_a_keyed_verifier(
    sinks: SinkBackend, tmp_path: Path, how: Forge
) -> None:
    """Row 2 rewritten and every hash and the head recomputed, without the key or with a key
    of the forger's own: the head is not the key's, so the keyed sink refuses the log."""
    rows = recomputed(edited(logged(sinks, tmp_path, 5), 2), how)
    store(sinks, tmp_path, rows, AuditHead(5, rows[-1].hash))
    assert found(sinks, tmp_path) == "E_AUDIT_KEY_MISMATCH"


def test_the_same_unkeyed_rewrite_of_an_unkeyed_log_verifies(
    sinks: SinkBackend, tmp_path: Path
) -> None:
    """Why keys: without one, the recomputed rewrite is a consistent chain (a head saved
    elsewhere is the only way to find it)."""
    sink = sinks.open(tmp_path)
    original = write(sink, 5)
    saved = sink.head()
    sink.close()
    rows = recomputed(edited(original, 2), "unkeyed")
    store(sinks, tmp_path, rows, AuditHead(5, rows[-1].hash))
    reopened = sinks.open(tmp_path)
    try:
        assert reopened.verify()
        assert reopened.verify(head=saved).first_bad_row == 4
    finally:
        reopened.close()


def test_a_rewrite_hashed_under_the_right_key_id_is_reported_at_its_row(
    sinks: SinkBackend, tmp_path: Path
) -> None:
    """The forger copies the key id in front of hashes anyone can make: row 2 (the first row
    whose hash changed) is reported, though the head is rewritten to match."""
    original = logged(sinks, tmp_path, 5)
    rows = recomputed(edited(original, 2), "key-id-on-sha256")
    # rows 0 and 1 are unchanged: keep their real keyed hashes, chain the rest after them
    forged = original[:2] + chain_from(2, edited(original, 2)[2:], original[1].hash)
    store(sinks, tmp_path, forged, AuditHead(5, forged[-1].hash))
    assert found(sinks, tmp_path) == 2
    store(sinks, tmp_path, rows, AuditHead(5, rows[-1].hash))  # every row recomputed
    assert found(sinks, tmp_path) == 0


@pytest.mark.parametrize("head", ["deleted", "rewritten"])
def test_a_cut_tail_is_found_with_the_head_deleted_or_rewritten(
    sinks: SinkBackend, tmp_path: Path, head: str
) -> None:
    """The last two rows cut and the stored head deleted, or rewritten to the new end: the key
    did not seal that head, so the verifier reports the rows from the cut on."""
    rows = logged(sinks, tmp_path, 5)[:3]
    store(sinks, tmp_path, rows, None if head == "deleted" else AuditHead(3, rows[-1].hash))
    assert found(sinks, tmp_path) == 3


def test_rows_appended_after_a_cut_do_not_hide_it(sinks: SinkBackend, tmp_path: Path) -> None:
    """A keyed sink opened on a log whose end was cut (head deleted) chains its next rows one
    index past the last row, so the cut stays reported after more appends and a reopen."""
    rows = logged(sinks, tmp_path, 4)[:2]
    store(sinks, tmp_path, rows, None)
    sink = sinks.open(tmp_path, key=KEY)
    try:
        asyncio.run(append(sink, [entry(9)]))
        assert sink.verify().first_bad_row == 2
    finally:
        sink.close()
    assert found(sinks, tmp_path) == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [("args", '{"cents":990000}'), ("tool", "shell"), ("decision", "denied"),
     ("is_error", True), ("ran", False), ("recorded_at", "2031-01-01T00:00:00+00:00")],
    ids=["args", "tool", "decision", "is_error", "ran", "recorded_at"],
)
def test_one_field_edited_in_place_is_reported_at_its_row(
    sinks: SinkBackend, tmp_path: Path, field: str, value: object
) -> None:
    """One field of row 1 edited where it is stored, every hash and the sealed head left as
    they were: row 1 is reported."""
    logged(sinks, tmp_path, 3)
    if sinks.name == "jsonl":
        path = tmp_path / "audit.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        row = json.loads(lines[1])
        row[field] = value
        lines[1] = json.dumps(row) + "\n"
        path.write_text("".join(lines))
    else:
        stored = int(value) if isinstance(value, bool) else value
        if sinks.name == "postgres" and field in _BYTEA:
            stored = str(value).encode("utf-8")
        sinks.sql(tmp_path, f"UPDATE audit_rows SET {field} = ? WHERE idx = 1", (stored,))
    assert found(sinks, tmp_path) == 1


@st.composite
def forgeries(draw: st.DrawFn) -> tuple[int, str, int]:
    n = draw(st.integers(min_value=2, max_value=6))
    op = draw(st.sampled_from(
        ["unkeyed", "other-key", "key-id-on-sha256", "cut-delete-head", "cut-rewrite-head",
         "edit", "drop-row"]
    ))
    # a cut keeps a row at least: a log cut to nothing is a new log (see the test below)
    k = draw(st.integers(min_value=1 if op.startswith("cut") else 0, max_value=n - 1))
    return n, op, k


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=forgeries())
def test_no_forgery_without_the_key_passes_a_keyed_verifier(
    sinks: SinkBackend, tmp_path_factory: pytest.TempPathFactory, case: tuple[int, str, int]
) -> None:
    """Whatever the forger does from row k on (recompute the chain, cut the tail with the
    head deleted or rewritten, edit a field, drop a row), the keyed verifier reports a row at or
    before k, or refuses the log; none verifies."""
    n, op, k = case
    folder = tmp_path_factory.mktemp("keyed")
    rows = logged(sinks, folder, n)
    if op in ("unkeyed", "other-key", "key-id-on-sha256"):
        forged = recomputed(edited(rows, k), op)  # type: ignore[arg-type]
        store(sinks, folder, forged, AuditHead(n, forged[-1].hash))
    elif op == "cut-delete-head":
        store(sinks, folder, rows[:k], None)
    elif op == "cut-rewrite-head":
        store(sinks, folder, rows[:k], AuditHead(k, rows[k - 1].hash if k else "0" * 64))
    elif op == "edit":
        store(sinks, folder, edited(rows, k), AuditHead(n, rows[-1].hash))
    else:
        kept = rows[:k] + [dataclasses.replace(r, index=r.index - 1) for r in rows[k + 1 :]]
        store(sinks, folder, kept, AuditHead(n - 1, kept[-1].hash) if kept else None)
    result = found(sinks, folder)
    assert result is not None, (op, k, n)
    if isinstance(result, int):
        assert result <= k, (op, k, n, result)


def test_a_log_deleted_whole_is_found_by_an_anchor(sinks: SinkBackend, tmp_path: Path) -> None:
    """Every row and the stored head deleted look like a new log, keyed or not (JSON Lines,
    PostgreSQL: the verifier finds nothing; an SQLite table is never without its head row, so
    there row 0 is reported), and the anchor kept elsewhere reports row 0 missing."""
    anchor = AuditAnchorFile(tmp_path / "audit.anchor")
    logged(sinks, tmp_path, 3, anchor=anchor)
    store(sinks, tmp_path, [], None)
    assert found(sinks, tmp_path) == (0 if sinks.name == "sqlite" else None)
    sink = sinks.open(tmp_path, key=KEY)
    try:
        assert sink.verify(head=anchor.read()).first_bad_row == 0
    finally:
        sink.close()
