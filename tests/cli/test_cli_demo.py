"""`loopware demo`: output, speed, colour rules and the audit file it writes."""

from __future__ import annotations

import io
import re
import tempfile
import time
from pathlib import Path

import pytest

from loopware_cli._demo import run_demo
from loopware_cli._main import main
from loopware_cli._style import Style
from middleware import SqliteAuditSink

EXPECTED = """\
loopware demo: a scripted support-agent turn (no network, no API keys)
stack, outermost first:
  ToolPolicy(deny=['shell*'])          shell tools are never offered
  RepetitionDetector(threshold=3)      a 3rd identical call hides the tool
  ToolCallLimit({'issue_refund': 1})   one refund per turn
  AuditLog(SqliteAuditSink(...))       hash-chained audit rows in AUDIT

user: Hi, I was charged twice for order NW-20417 ($64.90 each time). Can you refund the duplicate charge?
  policy shell_exec removed from the turn: denied - tool policy: matches deny pattern 'shell*'
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
    decision: hidden - repeat detected: identical call made 3 times (threshold 3)
iteration 4  offered: lookup_order, issue_refund, send_email
  shell_exec {"command": "psql -c \\"select * from payments where order_id = 'NW-20...
    error: E_TOOL_NOT_FOUND: unknown tool 'shell_exec'; available tools: lookup_order, issue_ref...
    decision: denied - tool policy: matches deny pattern 'shell*'
iteration 5  offered: lookup_order, issue_refund, send_email
  issue_refund {"payment_id": "pay_8842", "amount": 64.9, "reason": "duplicate charge"}
    result: {"refund_id": "re_5521", "payment_id": "pay_8842", "status": "pending"}
    decision: hidden - limit reached: 1 of 1 calls allowed
iteration 6  offered: lookup_order, send_email
  send_email {"customer_id": "cus_3310", "template": "refund_done"}
    result: queued
    decision: allowed
iteration 7  offered: lookup_order, send_email
assistant: Done: I refunded the duplicate charge of $64.90 (payment pay_8842). A confirmation email is on its way.

summary
  turn            completed in 8 iterations, N ms
  tool calls      7 (1 failed)
  repeats caught  1 (search_kb)
  tools hidden    2 (search_kb, issue_refund)
  calls denied    1 (shell_exec)
  audit rows      11 in AUDIT (4 allowed, 1 denied, 2 hidden)
  audit verified  yes
audit file: AUDIT (temporary; --audit PATH keeps it where you say)
done in N ms
"""  # noqa: E501


def audit_path_in(out: str) -> str:
    """The audit file path the demo printed."""
    match = re.search(r"^audit file: (\S+)", out, re.MULTILINE)
    assert match is not None, out
    return match[1]


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


def test_demo_prints_the_turn_and_summary_in_under_two_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The whole plain output is pinned (times aside) and the run takes under 2 s."""
    started = time.perf_counter()
    status = main(["demo"])
    elapsed = time.perf_counter() - started
    out = capsys.readouterr().out
    assert status == 0
    assert elapsed < 2.0
    out = out.replace(audit_path_in(out), "AUDIT")
    assert re.sub(r"\d+ ms", "N ms", out) == EXPECTED


def test_demo_audit_file_verifies_and_is_recreated_each_run(tmp_path: Path) -> None:
    """Running twice on one --audit path leaves one fresh, intact chain of call rows and 1 turn
    row."""
    path = tmp_path / "audit.sqlite"
    for _ in range(2):
        assert run_demo(io.StringIO(), audit_path=str(path)) == 0
    sink = SqliteAuditSink(path)
    try:
        rows = sink.rows()
        assert sink.verify() is None
    finally:
        sink.close()
    assert [r.entry.kind for r in rows] == ["tool_call"] * 10 + ["turn"]
    final = {r.entry.call_id: r.entry.decision for r in rows if r.entry.kind == "tool_call"}
    assert list(final.values()) == [
        "allowed",
        "allowed",
        "allowed",
        "hidden",
        "denied",
        "hidden",
        "allowed",
    ]


def test_demo_fails_with_status_1_when_the_audit_does_not_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broken chain is reported with the row that broke it, and the demo exits 1."""
    monkeypatch.setattr(SqliteAuditSink, "verify", lambda self, head=None: 3)
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
        assert sink.verify() is None
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
    sink = SqliteAuditSink(target)
    try:
        assert len(sink.rows()) == 11
    finally:
        sink.close()
