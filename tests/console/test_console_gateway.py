"""The MCP gateway's approvals answered in the console: a real ``loopware gateway`` whose
``[approval] webhook`` is a real ``loopware console``'s hook URL, driven by the mcp SDK's client.

Two calls of a tool needing approval wait on the approvals page together; in Chromium one is
approved and the other (hostile arguments: they render as text) rejected with a reason. The
client gets the forwarded result and the refusal (with who refused and why); the upstream ran
once; the audit log the two processes share holds the ``answer`` rows and the calls' rows, and
its chain verifies. Webhook requests without the hook token, with a wrong one, oversized or
malformed, list nothing; an answer without the CSRF value, or after the gateway's timeout,
changes nothing.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from middleware.audit import AuditSink, JsonlAuditSink, SqliteAuditSink
from tests.mcp.conftest import fixture_command, logged
from tests.mcp.test_gateway import stdio_gateway, texts

from .conftest import Console, needs_chromium, shoot
from .test_console_gates import HOSTILE, _assert_nothing_ran


def _gateway_config(folder: Path, calls: Path, audit: Path, webhook: str, timeout: float) -> Path:
    config = folder / "gateway.toml"
    config.write_text(
        f"""
[[upstream]]
name = "fixture"
command = {json.dumps(fixture_command(calls))}
prefix = "fx_"

[approval]
tools = ["fx_echo"]
webhook = {json.dumps(webhook)}
timeout = {timeout}

[audit]
path = {json.dumps(str(audit))}
"""
    )
    return config


class _Calls:
    """MCP calls made through a stdio gateway in a thread of their own (the browser is sync)."""

    def __init__(self, config: Path, *texts_: str) -> None:
        self.results: list[Any] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(config, texts_), daemon=True)
        self.thread.start()

    def _run(self, config: Path, texts_: tuple[str, ...]) -> None:
        async def calls() -> list[Any]:
            async with stdio_gateway(config) as client:
                made = [client.call_tool("fx_echo", {"text": t}) for t in texts_]
                return list(await asyncio.gather(*made))

        try:
            self.results = asyncio.run(calls())
        except BaseException as exc:  # seen by the test's thread
            self.error = exc

    def wait(self, timeout: float = 90) -> list[Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the MCP calls never returned"
        if self.error is not None:
            raise self.error
        return self.results


@pytest.fixture
def call_log(tmp_path: Path) -> Path:
    """Where the upstream (the MCP fixture server) logs the calls it runs."""
    return tmp_path / "calls.jsonl"


@pytest.fixture
def audit(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The gateway's audit log (JSON Lines unless the test asks for ``sqlite``), made before
    the console opens it."""
    if getattr(request, "param", "jsonl") == "sqlite":
        path = tmp_path / "gateway-audit.sqlite"
        SqliteAuditSink(path).close()
    else:
        path = tmp_path / "gateway-audit.jsonl"
        JsonlAuditSink(path).close()
    return path


@pytest.fixture
def console(tmp_path: Path, audit: Path) -> Iterator[Console]:
    running = Console("--audit", str(audit), "--as", "alice", cwd=tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _post(url: str, body: bytes, cookie: dict[str, Any] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if cookie is not None:
        request.add_header("Cookie", f"{cookie['name']}={cookie['value']}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _form(url: str, fields: dict[str, str], cookie: dict[str, Any]) -> tuple[int, str]:
    """POST a form without following the redirect: the status, and where it points."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(
            "POST",
            parts.path,
            body=urllib.parse.urlencode(fields),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"{cookie['name']}={cookie['value']}",
            },
        )
        answer = connection.getresponse()
        return answer.status, urllib.parse.unquote_plus(answer.getheader("Location") or "")
    finally:
        connection.close()


def _rows(audit: Path) -> list[Any]:
    """The log's rows, once its chain verified."""
    sink: AuditSink = SqliteAuditSink(audit) if audit.suffix == ".sqlite" else JsonlAuditSink(audit)
    try:
        assert sink.verify(), sink.verify().explain()
        return [row.entry for row in sink.rows()]
    finally:
        sink.close()


def _until(check: Callable[[], bool], page: Any, timeout: float = 60) -> None:
    """Reload ``page`` until ``check`` holds (console.js reloads too; this bounds the wait)."""
    for _ in range(int(timeout * 2)):
        if check():
            return
        page.wait_for_timeout(500)
        if not check():
            page.reload()
    raise AssertionError("the page never showed it")


@needs_chromium
@pytest.mark.parametrize("audit", ["jsonl", "sqlite"], indirect=True)
def test_gateway_approvals_answered_in_the_browser_forward_one_call_refuse_the_other_and_are_audited(  # noqa: E501
    tmp_path: Path, audit: Path, console: Console, browser_page: Any, call_log: Path
) -> None:
    page = browser_page
    dialogs: list[str] = []

    def refuse(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    page.goto(console.url)
    (cookie,) = page.context.cookies()

    # webhook requests the console refuses: nothing is listed, nothing is written
    hook = console.webhook.partition("?token=")[0]
    good = json.dumps({"tool": "fx_echo", "call_id": "x", "args": {}, "reason": "r"}).encode()
    assert _post(hook, good)[0] == 403  # no token
    assert _post(hook, good, cookie)[0] == 403  # a session cookie is no hook token
    assert _post(f"{hook}?token={console.token}", good)[0] == 403  # the access token is not it
    assert _post(f"{hook}?token=wrong", good)[0] == 403
    assert _post(console.webhook, b"{" + b" " * (1 << 20) + b"}")[0] == 413
    for bad in (
        b"not json",
        b"[1]",
        b'{"tool": "fx_echo", "call_id": "x", "args": {}}',
        b'{"tool": "", "call_id": "x", "args": {}, "reason": "r"}',
        b'{"tool": "t", "call_id": "x", "args": [], "reason": "r"}',
    ):
        status, said = _post(console.webhook, bad)
        assert status == 400, said
    page.goto(console.base + "/gates")
    assert page.locator("#no-gates").count() == 1
    assert _rows(audit) == []

    # two calls needing approval wait together on the approvals page
    config = _gateway_config(tmp_path, call_log, audit, console.webhook, timeout=120)
    calls = _Calls(config, "ship it", HOSTILE)
    hooks = page.locator("section.gate.hook")
    _until(lambda: hooks.count() == 2, page)
    plain = hooks.filter(has_text="ship it")
    hostile = hooks.filter(has_not_text="ship it")
    assert "from the MCP gateway" in plain.locator("h3").inner_text()
    # the arguments the handler will receive: validated, the schema's default filled in
    assert plain.locator("pre.args").inner_text() == '{\n  "text": "ship it",\n  "times": 1\n}'
    shown = json.dumps({"text": HOSTILE, "times": 1}, indent=2)
    assert hostile.locator("pre.args").inner_text() == shown
    assert "principal" in plain.locator("p.meta").inner_text()
    assert "waiting since" in plain.locator("p.meta").inner_text()
    _assert_nothing_ran(page)
    if audit.suffix == ".jsonl":
        shoot(page, tmp_path, "approvals-gateway")

    # an answer without the CSRF value, or with a wrong one, changes nothing
    hook_id = hostile.locator("input[name=hook_id]").get_attribute("value") or ""
    answer = {"hook_id": hook_id, "decision": "approve", "reason": ""}
    assert _form(console.base + "/answer", answer, cookie)[0] == 403
    assert _form(console.base + "/answer", {**answer, "csrf": "0" * 64}, cookie)[0] == 403
    page.reload()
    assert hooks.count() == 2
    assert logged(call_log) == []

    # reject the hostile call with a reason, approve the other
    hostile.get_by_label("Reason").fill("not this one")
    hostile.get_by_role("button", name="Reject").click()
    assert "rejected fx_echo call" in page.locator("#done").inner_text()
    plain.get_by_label("Reason").fill("looks fine")
    plain.get_by_role("button", name="Approve").click()
    assert "approved fx_echo call" in page.locator("#done").inner_text()
    assert "(from the MCP gateway)" in page.locator("#done").inner_text()
    shipped, refused = calls.wait()
    assert not shipped.is_error
    assert texts(shipped) == "ship it"
    assert refused.is_error
    assert "rejected by console:alice: not this one" in texts(refused)
    assert [c["args"]["text"] for c in logged(call_log)] == ["ship it"]  # ran exactly once

    # the page: no approval waits, both answers listed with who answered
    _until(lambda: page.locator("#no-gates").count() == 1, page)
    answered = page.locator("tr.answer-row")
    assert answered.count() == 2
    assert "console:alice" in answered.first.inner_text()
    _assert_nothing_ran(page)
    assert dialogs == []

    # the audit the two processes share: answer rows naming who, the calls' rows, one chain
    rows = _rows(audit)
    answers = {e.call_id: e for e in rows if e.kind == "answer"}
    stored = {e.call_id: e for e in rows if e.kind == "tool_call"}
    assert set(answers) == set(stored)
    by_text = {json.loads(e.args)["text"]: e for e in answers.values()}
    ok, no = by_text["ship it"], by_text[HOSTILE]
    assert (ok.decision, ok.policy, ok.reason) == ("approved", "console:alice", "looks fine")
    assert (no.decision, no.policy, no.reason) == ("rejected", "console:alice", "not this one")
    for answer_row in (ok, no):
        call = stored[answer_row.call_id]
        assert (answer_row.turn_id, answer_row.conversation_id, answer_row.tool) == (
            call.turn_id,
            call.conversation_id,
            call.tool,
        )
        assert answer_row.checksum is not None
        assert answer_row.checksum.startswith("loopware.approval:")  # the gateway's gate id
    assert (stored[ok.call_id].decision, stored[ok.call_id].ran) == ("approved", True)
    assert (stored[no.call_id].decision, stored[no.call_id].ran) == ("rejected", False)


@needs_chromium
def test_an_answer_after_the_gateways_timeout_changes_nothing_and_the_call_is_rejected(
    tmp_path: Path, audit: Path, console: Console, browser_page: Any, call_log: Path
) -> None:
    page = browser_page
    page.goto(console.url)
    (cookie,) = page.context.cookies()
    page.goto(console.base + "/gates")
    config = _gateway_config(tmp_path, call_log, audit, console.webhook, timeout=4)
    calls = _Calls(config, "too late")
    hooks = page.locator("section.gate.hook")
    _until(lambda: hooks.count() == 1, page)
    hook_id = hooks.locator("input[name=hook_id]").get_attribute("value") or ""
    csrf = hooks.locator("input[name=csrf]").get_attribute("value") or ""
    (refused,) = calls.wait()
    assert refused.is_error
    assert "E_CALL_REJECTED" in texts(refused)

    # the approval left the page, listed as expired; approving it now changes nothing
    _until(lambda: page.locator("li.expired-row").count() == 1, page)
    assert hooks.count() == 0
    assert "too late" not in page.locator("li.expired-row").inner_text()  # tool and call only
    answer = {"hook_id": hook_id, "decision": "approve", "reason": "", "csrf": csrf}
    status, where = _form(console.base + "/answer", answer, cookie)
    assert status == 303
    assert "expired" in where
    assert logged(call_log) == []
    rows = _rows(audit)
    assert [e.kind for e in rows if e.kind == "answer"] == []
    (call,) = [e for e in rows if e.kind == "tool_call"]
    assert (call.decision, call.ran) == ("rejected", False)


def test_a_webhook_request_whose_caller_leaves_expires(console: Console) -> None:
    """A caller that closes the connection (a gateway that stopped) leaves nothing waiting."""
    parts = urllib.parse.urlsplit(console.webhook)
    body = json.dumps({"tool": "t", "call_id": "c1", "args": {"a": 1}, "reason": "r"})
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=2)
    connection.request("POST", f"{parts.path}?{parts.query}", body=body)
    with pytest.raises(TimeoutError):
        connection.getresponse()  # held: nobody answers
    connection.close()
    read = _session(console)
    page = ""
    for _ in range(50):
        page = read("/gates")
        if "expired-row" in page:
            break
        threading.Event().wait(0.2)
    assert "expired-row" in page
    assert 'id="no-gates"' in page


def _session(console: Console) -> Callable[[str], str]:
    """A reader of the console's pages, with a session of its own."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(console.url, timeout=10) as front:
        front.read()

    def read(path: str) -> str:
        with opener.open(console.base + path, timeout=10) as answer:
            text: str = answer.read().decode()
            return text

    return read


def test_stopping_the_console_rejects_the_gateways_waiting_calls(
    tmp_path: Path, audit: Path, console: Console, call_log: Path
) -> None:
    read = _session(console)
    config = _gateway_config(tmp_path, call_log, audit, console.webhook, timeout=120)
    calls = _Calls(config, "while it stops")
    for _ in range(120):
        if 'section class="gate hook"' in read("/gates"):
            break
        threading.Event().wait(0.5)
    else:
        raise AssertionError("the gateway's approval never waited on the console")
    console.stop()
    (refused,) = calls.wait(timeout=60)  # well before the gateway's own timeout (120 s)
    assert refused.is_error
    assert "E_CALL_REJECTED" in texts(refused)
    assert logged(call_log) == []
    assert [e.kind for e in _rows(audit) if e.kind == "answer"] == []
