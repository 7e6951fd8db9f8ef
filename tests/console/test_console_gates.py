"""The console in a real browser over real durable turns: approve one gate, reject another from
the page, see the waiting turns finish and the audit record who answered; the page follows a gate
answered elsewhere on its own; requests without the session or the CSRF value change nothing.

The turns run in a real ``loopware worker`` process (the durable tests' application, whose
``refund`` tool waits behind an `ApprovalGate`); the console is a real ``loopware console``
process. One of the refunds names a hostile order: its arguments and its result reach the page
holding ``<script>``, an ``onerror=`` attribute, a ``javascript:`` link and a look-alike form.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from middleware.audit import SqliteAuditSink
from pipeline.durable import DurableClient
from tests.pipeline.durable.conftest import Workers

from .conftest import Console, needs_chromium, shoot

HOSTILE = (
    "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
    "<a href=javascript:window.__pwned=3>click</a></pre><form action=/answer method=post>"
    "<button>Approve all</button></form>"
)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    team = Workers(tmp_path)
    team.write_config(concurrency=3)
    try:
        yield team
    finally:
        team.close()


def _gate(workers: Workers, proc: Any) -> str:
    return workers.read_until(proc, "gate waiting:").split()[2]


def _post(url: str, fields: dict[str, str], cookie: dict[str, Any] | None) -> int:
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(fields).encode(), method="POST"
    )
    if cookie is not None:
        request.add_header("Cookie", f"{cookie['name']}={cookie['value']}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _audit_rows(workers: Workers) -> list[Any]:
    sink = SqliteAuditSink(workers.audit)
    try:
        return sink.rows()
    finally:
        sink.close()


def _assert_nothing_ran(page: Any) -> None:
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.locator("script").count() == 1  # ours: /static/console.js
    assert page.locator("img").count() == 0
    assert page.locator('a[href^="javascript"]').count() == 0
    assert page.locator("form[action='/answer']").count() == page.locator("section.gate").count()


@needs_chromium
def test_gates_answered_in_the_browser_finish_the_waiting_turns_and_are_audited_with_who(
    workers: Workers, browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    dialogs: list[str] = []

    def refuse(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    client = DurableClient(workers.system_database)
    worker = workers.start()
    console = None
    try:
        hostile = client.enqueue(f"refund {HOSTILE}", conversation_id="shop")
        plain = client.enqueue("refund B2", conversation_id="shop")
        gates = {_gate(workers, worker), _gate(workers, worker)}
        assert gates == {f"{hostile}:gate-1", f"{plain}:gate-1"}
        console = Console(
            "--audit", str(workers.audit), "--store", str(workers.store),
            "--config", str(workers.config), "--as", "alice",
            cwd=workers.folder,
        )
        rows_before = len(_audit_rows(workers))

        # no session, a wrong token, no CSRF value, a wrong one: nothing changes
        answer = {"gate_id": f"{plain}:gate-1", "decision": "approve", "reason": ""}
        assert _post(console.base + "/answer", answer, None) == 401
        assert _post(console.base + "/answer?token=wrong", answer, None) == 403

        page.goto(console.url)
        assert page.url == console.base + "/"  # the token left the address bar
        port = console.base.rsplit(":", 1)[1]
        (cookie,) = page.context.cookies()
        assert cookie["name"] == f"loopware_console_{port}"
        assert cookie["httpOnly"]
        assert cookie["sameSite"] == "Strict"
        assert _post(console.base + "/answer", answer, cookie) == 403
        assert _post(console.base + "/answer", {**answer, "csrf": "0" * 64}, cookie) == 403
        assert {g["gate_id"] for g in client.waiting_gates()} == gates
        assert len(_audit_rows(workers)) == rows_before

        # the waiting turns, and the approvals page with the validated arguments
        assert page.locator("tr.turn .status.waiting").count() == 2
        shoot(page, tmp_path, "turns-waiting")
        page.get_by_role("link", name="2 approvals waiting").click()
        section = page.locator("section.gate").filter(has_text='"B2"')
        # quoted, as the arguments show it: text matching ignores case, and a random hex id on
        # the page may hold "b2"
        hostile_section = page.locator("section.gate").filter(has_not_text='"B2"')
        assert page.locator("section.gate").count() == 2
        assert hostile_section.locator("pre.args").inner_text() == f'{{\n  "order": "{HOSTILE}"\n}}'
        assert section.locator("pre.args").inner_text() == '{\n  "order": "B2"\n}'
        _assert_nothing_ran(page)
        shoot(page, tmp_path, "approvals")

        # reject the plain refund with a reason, approve the hostile one
        # (a reason typed holds the page's own reloads, so each click lands on the form)
        section.get_by_label("Reason").fill("not without a receipt")
        section.get_by_role("button", name="Reject").click()
        assert page.locator("#done").inner_text() == f"rejected {plain}:gate-1"
        hostile_section.get_by_label("Reason").fill("receipt checked")
        hostile_section.get_by_role("button", name="Approve").click()
        assert page.locator("#done").inner_text() == f"approved {hostile}:gate-1"
        done_hostile = client.result(hostile, timeout=60)
        done_plain = client.result(plain, timeout=60)
        assert done_hostile["status"] == done_plain["status"] == "completed"
        assert done_hostile["output"] == f"refund: refunded {HOSTILE}"
        assert "rejected by console:alice: not without a receipt" in str(done_plain["output"])

        # the page follows on its own: answered rows with who answered, no gate left
        page.locator("#no-gates").wait_for(timeout=30_000)
        answered = page.locator("tr.answer-row")
        assert answered.count() == 2
        assert "console:alice" in answered.first.inner_text()
        shoot(page, tmp_path, "approvals-answered")

        # the finished turn: its call, the decision, the arguments and result as text
        page.goto(console.base + "/")
        assert page.locator("tr.turn .status.completed").count() == 2
        shoot(page, tmp_path, "turns")
        page.locator("tr.turn", has_text="refund: approved").get_by_role("link").first.click()
        assert page.locator("#turn-status").inner_text() == "completed"
        call = page.locator("li.call")
        assert call.count() == 1
        assert call.locator("h3").inner_text() == "refund approved"
        assert "ran" in call.locator("p.meta").first.inner_text()
        assert call.locator("table.decisions td").first.inner_text() == "approved"
        assert call.locator("pre.args").inner_text() == f'{{\n  "order": "{HOSTILE}"\n}}'
        assert call.locator("pre.result").inner_text() == f"refunded {HOSTILE}"
        assert page.locator("dd.text").first.inner_text() == f"refund {HOSTILE}"
        _assert_nothing_ran(page)
        shoot(page, tmp_path, "turn")

        # the audit: answer rows first, then each call's own row, all chained
        page.goto(console.base + "/audit")
        assert "intact" in page.locator("#chain").inner_text()
        shoot(page, tmp_path, "audit")
        _assert_nothing_ran(page)
    finally:
        if console is not None:
            console.stop()
        client.close()
        workers.stop(worker)
    rows = [r.entry for r in _audit_rows(workers)]
    answers = [(e.decision, e.policy, e.reason, e.checksum) for e in rows if e.kind == "answer"]
    assert answers == [
        ("rejected", "console:alice", "not without a receipt", f"{plain}:gate-1"),
        ("approved", "console:alice", "receipt checked", f"{hostile}:gate-1"),
    ]
    calls = {e.turn_id: e for e in rows if e.kind == "tool_call"}
    assert (calls[hostile].decision, calls[hostile].ran) == ("approved", True)
    assert (calls[plain].decision, calls[plain].ran) == ("rejected", False)
    assert workers.handler_runs() == {f"refund {HOSTILE}": 1}
    assert dialogs == []


@needs_chromium
def test_the_pages_follow_a_gate_answered_elsewhere_and_the_turn_it_finishes_by_themselves(
    workers: Workers, browser_page: Any
) -> None:
    page = browser_page
    client = DurableClient(workers.system_database)
    worker = workers.start()
    console = None
    try:
        turn = client.enqueue("refund C3", conversation_id="shop")
        gate_id = _gate(workers, worker)
        console = Console(
            "--audit", str(workers.audit), "--config", str(workers.config), cwd=workers.folder
        )
        page.goto(console.url)
        assert page.locator("tr.turn .status").inner_text() == "waiting"
        approved = workers.cli("approve", "--config", str(workers.config), gate_id)
        assert approved.returncode == 0, approved.stderr
        # console.js reloads the page when the gate closes and when the turn's rows arrive
        page.locator("tr.turn .status.completed").wait_for(timeout=30_000)
        assert page.locator("tr.turn .verdict").inner_text() == "refund: approved"
        page.get_by_role("link", name="Approvals").first.click()
        assert page.url == console.base + "/gates"
        assert page.locator("#no-gates").count() == 1
        assert client.result(turn, timeout=60)["status"] == "completed"
    finally:
        if console is not None:
            console.stop()
        client.close()
        workers.stop(worker)
