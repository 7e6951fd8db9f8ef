"""``loopware audit verify|show``: a good log, an edited row and a cut tail, for every sink.

Logs are written by the sinks themselves (``tests/middleware/_forger.py``'s rows), tampered with
through their storage (``tests/middleware/_sinks.py``: files, SQLite, a chain in a database on
the throw-away PostgreSQL server of ``tests/_pg.py``), and read by the command's ``main``.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from loopware_cli import main
from middleware.audit import AuditAnchorFile
from tests.middleware._forger import KEY, write
from tests.middleware._sinks import JsonlSinks, PostgresSinks, SinkBackend, SqliteSinks


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def sinks(request: pytest.FixtureRequest) -> SinkBackend:
    """Each audit sink: JSON Lines, SQLite, PostgreSQL (a chain per log folder)."""
    if request.param == "jsonl":
        return JsonlSinks()
    if request.param == "sqlite":
        return SqliteSinks()
    return PostgresSinks(request.getfixturevalue("pg_conninfo"))


def _log_args(sinks: SinkBackend, folder: Path) -> list[str]:
    """How the command names the log of ``folder``: a file, or a URL and a chain."""
    if isinstance(sinks, PostgresSinks):
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(sinks.conninfo)
        url = (
            f"postgresql://{info['user']}@/{info['dbname']}"
            f"?host={quote(str(info['host']), safe='')}&port={info['port']}"
        )
        return [url, "--chain", str(folder)]
    return [str(folder / ("audit.jsonl" if sinks.name == "jsonl" else "audit.sqlite"))]


def _logged(sinks: SinkBackend, folder: Path, count: int = 4, **options: object) -> None:
    sink = sinks.open(folder, **options)  # type: ignore[arg-type]  # key=, anchor=
    try:
        write(sink, count)
    finally:
        sink.close()


def _edit_row(sinks: SinkBackend, folder: Path, k: int) -> None:
    """Flip row k's ``is_error`` in place (its hash left as it was)."""
    if sinks.name != "jsonl":
        sinks.sql(folder, "UPDATE audit_rows SET is_error = 1 - is_error WHERE idx = ?", (k,))
        return
    path = folder / "audit.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    row = json.loads(lines[k])
    row["is_error"] = not row["is_error"]
    lines[k] = json.dumps(row, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))


def _cut_tail(sinks: SinkBackend, folder: Path, keep: int) -> None:
    """Delete every row from ``keep`` on, leaving the stored head as it was."""
    if sinks.name != "jsonl":
        sinks.sql(folder, "DELETE FROM audit_rows WHERE idx >= ? AND prev_hash IS NOT NULL",
                  (keep,))
        return
    path = folder / "audit.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:keep]))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_verify_exits_0_on_a_good_log_of_every_sink(
    sinks: SinkBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log as its sink wrote it verifies: exit 0 and the number of rows."""
    _logged(sinks, tmp_path)
    status, out, _ = _run(capsys, "audit", "verify", *_log_args(sinks, tmp_path))
    assert status == 0
    assert out.rstrip().endswith(": intact: 4 rows")


def test_verify_exits_1_naming_an_edited_row_and_why(
    sinks: SinkBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row edited in place is the first bad row, with ``E_AUDIT_ROW_EDITED`` (text and JSON)."""
    _logged(sinks, tmp_path)
    _edit_row(sinks, tmp_path, 2)
    status, out, _ = _run(capsys, "audit", "verify", *_log_args(sinks, tmp_path))
    assert status == 1
    assert ": row 2: E_AUDIT_ROW_EDITED: " in out
    status, out, _ = _run(capsys, "audit", "verify", *_log_args(sinks, tmp_path), "--json")
    report = json.loads(out)
    assert status == 1
    assert (report["ok"], report["first_bad_row"], report["reason"]) == (
        False,
        2,
        "E_AUDIT_ROW_EDITED",
    )


def test_verify_exits_1_naming_the_first_row_cut_from_the_tail(
    sinks: SinkBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows cut from the end while the stored head still counts them: ``E_AUDIT_ROWS_MISSING``
    at the first missing row."""
    _logged(sinks, tmp_path)
    _cut_tail(sinks, tmp_path, 3)
    status, out, _ = _run(capsys, "audit", "verify", *_log_args(sinks, tmp_path))
    assert status == 1
    assert ": row 3: E_AUDIT_ROWS_MISSING: " in out


def test_a_keyed_log_verifies_with_its_key_and_is_refused_without_it(
    sinks: SinkBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--key-file`` verifies a keyed log; without the key the log's mode is the finding."""
    folder = tmp_path / "log"
    folder.mkdir()
    _logged(sinks, folder, key=KEY)
    key_file = tmp_path / "audit.key"
    key_file.write_text(bytes(range(32)).hex())
    log = _log_args(sinks, folder)
    status, out, _ = _run(capsys, "audit", "verify", *log, "--key-file", str(key_file))
    assert (status, out.rstrip().endswith("intact: 4 rows")) == (0, True)
    status, out, _ = _run(capsys, "audit", "verify", *log)
    assert status == 1
    assert "E_AUDIT_KEY_MISMATCH" in out


def test_verify_with_an_anchor_finds_a_log_rolled_back_to_an_earlier_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--anchor FILE`` checks the log against the head kept there: a log that is whole on its
    own but shorter than the anchored head reports the rows it lost."""
    anchor = AuditAnchorFile(tmp_path / "audit.anchor")
    sinks = SqliteSinks()
    _logged(sinks, tmp_path, 2)
    copy = (tmp_path / "audit.sqlite").read_bytes()
    sink = sinks.open(tmp_path, anchor=anchor)
    write(sink, 2)
    sink.close()
    (tmp_path / "audit.sqlite").write_bytes(copy)
    log = _log_args(sinks, tmp_path)
    assert _run(capsys, "audit", "verify", *log)[0] == 0
    status, out, _ = _run(capsys, "audit", "verify", *log, "--anchor", str(anchor.path))
    assert status == 1
    assert ": row 2: E_AUDIT_ROWS_MISSING: " in out


def test_show_prints_the_rows_matching_every_filter_as_text_or_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` keeps the rows of the conversation, call id and decision asked for."""
    sinks = JsonlSinks()
    _logged(sinks, tmp_path, 5)  # odd rows belong to conversation "c"
    log = _log_args(sinks, tmp_path)
    status, out, _ = _run(capsys, "audit", "show", *log, "--conversation", "c", "--json")
    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["index"], r["call_id"], r["conversation_id"]) for r in rows] == [
        (1, "call-1", "c"),
        (3, "call-3", "c"),
    ]
    assert len(rows[0]["hash"]) == 64
    status, out, _ = _run(capsys, "audit", "show", *log, "--call-id", "call-2")
    assert status == 0
    assert out.splitlines()[0].startswith("#2 ")
    assert "allowed refund call=call-2" in out
    assert _run(capsys, "audit", "show", *log, "--decision", "denied") == (0, "", "")


def test_unreadable_logs_exit_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file, an SQLite file that holds no audit log (left unchanged) and a key that
    cannot be loaded exit 3 with a one-line error; a bad decision word is a usage error."""
    status, _, err = _run(capsys, "audit", "verify", str(tmp_path / "missing.jsonl"))
    assert (status, err.count("\n"), "no such file" in err) == (3, 1, True)
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    before = other.read_bytes()
    status, _, err = _run(capsys, "audit", "show", str(other))
    assert (status, "holds no audit log" in err, other.read_bytes() == before) == (3, True, True)
    _logged(JsonlSinks(), tmp_path)
    status, _, err = _run(
        capsys, "audit", "verify", str(tmp_path / "audit.jsonl"), "--key-env", "LOOPWARE_NO_KEY"
    )
    assert (status, "E_AUDIT_KEY" in err) == (3, True)
    assert _run(capsys, "audit", "show", str(tmp_path / "audit.jsonl"), "--decision", "ok")[0] == 2
