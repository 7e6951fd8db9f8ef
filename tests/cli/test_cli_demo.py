"""`loopware demo`: output, speed, colour rules and the audit file it writes."""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

import pytest

from loopware_cli._demo import run_demo
from loopware_cli._main import main
from loopware_cli._style import Style
from middleware.audit import AuditRow, AuditVerification, SqliteAuditSink

EXPECTED = """\
loopware demo: a scripted support-agent turn (no network, no API keys)
stack, outermost first:
  ToolPolicy(deny=['shell*'])          shell tools are never offered
  RepetitionDetector(threshold=3)      a 3rd identical call hides the tool
  ToolCallLimit({'issue_refund': 1})   one refund per turn
  AuditLog(SqliteAuditSink(...))       hash-chained audit rows in AUDIT

user: Hi, I was charged twice for order NW-20417 ($64.90 each time). Can you refund the duplicate charge?
  tool shell_exec withdrawn - tool policy: matches deny pattern 'shell*' [loopware.policy]
iteration 0  offered: lookup_order, search_kb, issue_refund, send_email
  lookup_order {"order_id": "NW-20417"}
    result: {"order_id": "NW-20417", "customer_id": "cus_3310", "status": "delivered", "total": 6...
    decision: allowed
iteration 1  offered: lookup_order, search_kb, issue_refund, send_email
  search_kb {"query": "duplicate charge refund"}
    result: KB-112 Duplicate charges: refund the later payment in full. No approval under $200.
    decision: allowed
iteration 2  offered: lookup_order, search_kb, issue_refund, send_email
  search_kb {"query": "duplicate charge refund"}
    result: KB-112 Duplicate charges: refund the later payment in full. No approval under $200.
    decision: allowed
iteration 3  offered: lookup_order, search_kb, issue_refund, send_email
  search_kb {"query": "duplicate charge refund"}
    result: KB-112 Duplicate charges: refund the later payment in full. No approval under $200.
    decision: allowed
    then: tool search_kb hidden - repeat detected: the same call was made 3 times (threshold 3) [loopware.repetition]
iteration 4  offered: lookup_order, issue_refund, send_email
  shell_exec {"command": "psql -c \\"select * from payments where order_id = 'NW-20...
    error: E_TOOL_UNAVAILABLE: tool 'shell_exec' is no longer available in this turn (loopware.p...
    decision: denied - tool policy: the tool was withdrawn: matches deny pattern 'shell*' [loopware.policy]
iteration 5  offered: lookup_order, issue_refund, send_email
  issue_refund {"payment_id": "pay_8842", "amount": 64.9, "reason": "duplicate charge"}
    result: {"refund_id": "re_5521", "payment_id": "pay_8842", "status": "pending"}
    decision: allowed
    then: tool issue_refund hidden - limit reached: its limit of 1 run per turn is used up [loopware.limit]
iteration 6  offered: lookup_order, send_email
  send_email {"customer_id": "cus_3310", "template": "refund_done"}
    result: queued
    decision: allowed
iteration 7  offered: lookup_order, send_email
assistant: Done: I refunded the duplicate charge of $64.90 (payment pay_8842). A confirmation email is on its way.

summary
  turn            completed in 8 iterations, N ms
  tool calls      7 (6 allowed, 1 denied)
  repeats caught  1 (search_kb)
  tool decisions  3 (shell_exec withdrawn, search_kb hidden, issue_refund hidden)
  calls not run   1 (shell_exec denied)
  audit rows      ROWS
  audit verified  yes
audit file: AUDIT (temporary; --audit PATH keeps it where you say)
done in N ms
"""  # noqa: E501


def audit_path_in(out: str) -> str:
    """The audit file path the demo printed."""
    match = re.search(r"^audit file: (\S+)", out, re.MULTILINE)
    assert match is not None, out
    return match[1]


AUDIT_LINE = re.compile(r"^  audit rows      (\d+) = (.*)$", re.MULTILINE)
KIND = re.compile(r"^(\d+) ([a-z ]+?)(?: \((.*)\))?$")


def audit_line(out: str) -> tuple[int, dict[str, int], dict[str, dict[str, int]]]:
    """The summary's audit line: the row count, the rows by kind, and each kind's words."""
    match = AUDIT_LINE.search(out)
    assert match is not None, out
    kinds: dict[str, int] = {}
    words: dict[str, dict[str, int]] = {}
    for part in match[2].split(" + "):
        kind = KIND.match(part)
        assert kind is not None, part
        kinds[kind[2]] = int(kind[1])
        for word in (kind[3] or "").split(", ") if kind[3] else ():
            n, name = word.split(" ", 1)
            words.setdefault(kind[2], {})[name] = int(n)
    return int(match[1]), kinds, words


def audit_rows(path: str | Path) -> list[AuditRow]:
    sink = SqliteAuditSink(path)
    try:
        assert sink.verify()
        return sink.rows()
    finally:
        sink.close()


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _in_tmp(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run in a fresh working directory (the demo must leave nothing in it), with temporary
    files in a folder of their own (cleaned up with the test's)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("system-tmp")))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)


def test_demo_prints_the_turn_and_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The whole plain output is pinned (times aside)."""
    status = main(["demo"])
    out = capsys.readouterr().out
    assert status == 0
    out = AUDIT_LINE.sub("  audit rows      ROWS", out.replace(audit_path_in(out), "AUDIT"))
    assert re.sub(r"\d+ ms", "N ms", out) == EXPECTED


def test_the_summary_adds_up_and_reads_the_audit_file_it_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The audit line counts the file's rows by kind (the parts sum to the whole, each kind's
    words to the kind), one row per call: as many call rows as the summary's tool calls, one
    per call id of the script."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    total, kinds, words = audit_line(out)
    rows = audit_rows(audit_path_in(out))
    assert total == len(rows) == sum(kinds.values())
    assert kinds == {"tool decisions": 3, "calls": 7, "turn end": 1}
    assert words == {
        "tool decisions": {"hidden": 2, "withdrawn": 1},
        "calls": {"allowed": 6, "denied": 1},
    }
    assert all(sum(words[kind].values()) == kinds[kind] for kind in words)
    assert "  tool calls      7 (6 allowed, 1 denied)" in out.splitlines()
    calls = [str(r.entry.call_id) for r in rows if r.entry.kind == "tool_call"]
    assert sorted(calls) == [f"call_{n}" for n in range(1, 8)]
    assert rows[-1].entry.kind == "turn"


def test_demo_audit_file_verifies_and_is_recreated_each_run(tmp_path: Path) -> None:
    """Running twice on one --audit path leaves one fresh, intact chain (the second run's rows
    only, ending with its turn row)."""
    path = tmp_path / "audit.sqlite"
    once = io.StringIO()
    assert run_demo(once, audit_path=str(path)) == 0
    first = audit_rows(path)
    twice = io.StringIO()
    assert run_demo(twice, audit_path=str(path)) == 0
    rows = audit_rows(path)
    assert len(rows) == len(first) == audit_line(twice.getvalue())[0]
    assert [r.entry.kind for r in rows].count("turn") == 1
    assert rows[-1].entry.kind == "turn"
    assert rows[0].entry.turn_id != first[0].entry.turn_id


def test_demo_fails_with_status_1_when_the_audit_does_not_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broken chain is reported with the row that broke it, and the demo exits 1."""
    broken = AuditVerification(
        ok=False, rows_checked=4, first_bad_row=3, reason="E_AUDIT_ROW_EDITED"
    )
    monkeypatch.setattr(SqliteAuditSink, "verify", lambda self, head=None: broken)
    out = io.StringIO()
    assert run_demo(out) == 1
    assert "  audit verified  no: row 3 is broken" in out.getvalue().splitlines()


def test_demo_reports_an_unwritable_audit_file_with_status_1(tmp_path: Path) -> None:
    """A directory where the audit file should be is an error message, not a traceback."""
    (tmp_path / "blocked").mkdir()
    out, err = io.StringIO(), io.StringIO()
    assert run_demo(out, audit_path=str(tmp_path / "blocked"), err=err) == 1
    assert err.getvalue().startswith("loopware demo: error: cannot write the audit file")
    assert out.getvalue() == ""


def test_demo_uses_colour_only_on_a_terminal_without_no_color(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Colour on a TTY; none with --plain, with NO_COLOR set, or when piped."""
    audit = str(tmp_path / "audit.sqlite")
    terminal = FakeTerminal()
    assert run_demo(terminal, audit_path=audit) == 0
    assert "\x1b[" in terminal.getvalue()
    plain = FakeTerminal()
    assert run_demo(plain, plain=True, audit_path=audit) == 0
    assert "\x1b[" not in plain.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    no_color = FakeTerminal()
    assert run_demo(no_color, audit_path=audit) == 0
    assert "\x1b[" not in no_color.getvalue()
    # the coloured text is the plain text plus escape codes
    assert (
        re.sub(r"\x1b\[[\d;]*m", "", terminal.getvalue()).splitlines()[:30]
        == (plain.getvalue().splitlines()[:30])
    )


@pytest.mark.parametrize(
    ("env", "tty", "plain", "enabled"),
    [
        ({}, True, False, True),
        ({}, False, False, False),
        ({}, True, True, False),
        ({"NO_COLOR": "1"}, True, False, False),
        ({"NO_COLOR": ""}, True, False, True),
        ({"TERM": "dumb"}, True, False, False),
    ],
    ids=["tty", "pipe", "plain", "no-color", "empty-no-color", "dumb-term"],
)
def test_style_follows_the_colour_rules(
    env: dict[str, str], tty: bool, plain: bool, enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Colour needs a TTY, no --plain, NO_COLOR unset or empty, and a TERM that is not dumb."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    stream = FakeTerminal() if tty else io.StringIO()
    style = Style.for_stream(stream, plain=plain)
    assert style.enabled is enabled
    assert (style.paint("x", "red") != "x") is enabled


def test_demo_writes_its_audit_file_to_a_temporary_file_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --audit nothing lands in the working directory; the output names the file."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    path = Path(audit_path_in(out))
    assert path.is_absolute()
    assert path.parent.parent == Path(tempfile.gettempdir())
    sink = SqliteAuditSink(path)
    try:
        assert sink.verify()
    finally:
        sink.close()
    assert f"audit file: {path} (temporary; --audit PATH keeps it where you say)" in out


def test_demo_audit_option_writes_where_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--audit PATH writes (and recreates) the audit database at PATH."""
    target = tmp_path / "kept.sqlite"
    for _ in range(2):
        assert main(["demo", "--audit", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"audit file: {target}" in out.splitlines()
    assert audit_path_in(out) == str(target)
    assert len(audit_rows(target)) == audit_line(out)[0]
