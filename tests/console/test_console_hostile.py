"""A hostile model's text on every page renders as text: no script runs, the DOM holds it
literally; a broken chain is shown with its first bad row; the console refuses what is unsafe."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ._turns import (
    CONVERSATION,
    HOSTILE,
    LOOK_ALIKE,
    MADE_UP_TOOL,
    hostile_turn,
    run_hostile_turn,
)
from .conftest import ROOT, Console, needs_chromium, shoot


@pytest.fixture
async def hostile_logs(tmp_path: Path) -> tuple[Path, Path, str]:
    return await hostile_turn(tmp_path)


def _watch(page: Any) -> list[str]:
    """Collect dialogs, page errors and CSP reports (console errors) while the test runs."""
    seen: list[str] = []

    def refuse(dialog: Any) -> None:
        seen.append(f"dialog {dialog.message}")
        dialog.dismiss()

    page.on("dialog", refuse)
    page.on("pageerror", lambda e: seen.append(f"error {e}"))
    return seen


def _assert_inert(page: Any) -> None:
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.locator("script").count() == 1  # ours: /static/console.js
    assert page.locator("img").count() == 0
    assert page.locator('a[href^="javascript"]').count() == 0
    assert page.locator("#chain").count() <= 1  # the look-alike banner is text, not an element


@needs_chromium
def test_hostile_arguments_results_and_names_render_as_text_and_no_script_runs(
    hostile_logs: tuple[Path, Path, str], browser_page: Any, tmp_path: Path
) -> None:
    audit, store, turn_id = hostile_logs
    page = browser_page
    seen = _watch(page)
    console = Console("--audit", str(audit), "--store", str(store), cwd=tmp_path)
    try:
        response = page.goto(console.url)
        assert response is not None
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        turn_row = page.locator("tr.turn")
        shown = turn_row.locator("td.text").inner_text()  # cut to 80 characters, at a word
        assert shown.startswith("please <script>window.__pwned=1</script><img src=x")
        assert shown.endswith("...")
        assert turn_row.locator("td").nth(1).inner_text() == CONVERSATION
        conversation_link = turn_row.locator("td").nth(1).locator("a").get_attribute("href")
        assert conversation_link == "?conversation=javascript%3Awindow.__pwned%3D4"
        _assert_inert(page)

        page.goto(f"{console.base}/turns/{turn_id}")
        calls = page.locator("li.call")
        assert calls.count() == 3
        assert calls.nth(0).locator("pre.result").inner_text() == f"echo: {HOSTILE}"
        args = json.dumps({"text": HOSTILE}, indent=2, ensure_ascii=False)
        assert calls.nth(0).locator("pre.args").inner_text() == args
        assert calls.nth(2).locator("h3").inner_text() == f"{MADE_UP_TOOL} invalid"
        assert MADE_UP_TOOL in calls.nth(2).locator("table.decisions").inner_text()
        assert page.locator("dd.text").first.inner_text() == f"please {HOSTILE}"
        assert LOOK_ALIKE in page.locator("main").inner_text()
        _assert_inert(page)

        page.goto(f"{console.base}/audit?tool={MADE_UP_TOOL}")
        assert page.locator("tr.row").count() == 1
        assert page.locator("tr.row td").nth(4).inner_text() == MADE_UP_TOOL
        assert page.locator("input[name=tool]").input_value() == MADE_UP_TOOL
        _assert_inert(page)
    finally:
        console.stop()
    assert seen == []


@needs_chromium
def test_a_broken_chain_shows_its_first_bad_row_on_every_page(
    hostile_logs: tuple[Path, Path, str], browser_page: Any, tmp_path: Path
) -> None:
    audit, store, _ = hostile_logs
    broken = tmp_path / "broken.sqlite"
    shutil.copy(audit, broken)
    with sqlite3.connect(broken) as conn:  # someone turns a denial into an allowed call
        conn.execute("UPDATE audit_rows SET decision = 'allowed' WHERE idx = 2")
    conn.close()
    page = browser_page
    console = Console("--audit", str(broken), "--store", str(store), "--as", "alice", cwd=tmp_path)
    try:
        page.goto(console.url)
        banner = page.locator("#chain")
        assert banner.get_attribute("class") == "chain bad"
        assert "broken: row 2: E_AUDIT_ROW_EDITED" in " ".join(banner.inner_text().split())
        banner.get_by_role("link", name="Show row 2").click()
        assert page.url.endswith("/audit#row-2")
        assert page.locator("tr.bad").get_attribute("id") == "row-2"
        shoot(page, tmp_path, "audit-broken")
        _assert_inert(page)
    finally:
        console.stop()


def _console(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopware_cli", "console", *argv],
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_public_address_is_refused_without_allow_remote_and_an_unusable_log_exits_3(
    hostile_logs: tuple[Path, Path, str], tmp_path: Path
) -> None:
    audit, _, _ = hostile_logs
    public = _console("--audit", str(audit), "--host", "0.0.0.0", cwd=tmp_path)
    assert public.returncode == 4
    assert "not a loopback address" in public.stderr
    assert public.stdout == ""  # no token printed, nothing served
    missing = _console("--audit", str(tmp_path / "nope.sqlite"), cwd=tmp_path)
    assert missing.returncode == 3
    assert "no such file" in missing.stderr
    no_key = _console("--audit", str(audit), "--key-env", "LOOPWARE_NO_SUCH_KEY", cwd=tmp_path)
    assert no_key.returncode == 3
    assert "LOOPWARE_NO_SUCH_KEY" in no_key.stderr
    assert "Traceback" not in no_key.stderr


def _url(conninfo: str) -> str:
    """The ``postgresql://`` URL of a ``key=value`` conninfo (the form the console takes)."""
    fields = dict(part.split("=", 1) for part in conninfo.split())
    return (
        f"postgresql://{fields['user']}@/{fields['dbname']}"
        f"?host={fields['host']}&port={fields['port']}"
    )


async def test_the_console_reads_a_postgresql_audit_chain_and_store(
    pg_conninfo: str, tmp_path: Path
) -> None:
    from middleware.audit import PostgresAuditSink
    from pipeline.stores import MemorySpoolStore, PostgresStore

    async with PostgresStore(pg_conninfo, spool=MemorySpoolStore()) as store:
        turn_id = await run_hostile_turn(store, PostgresAuditSink(pg_conninfo))
    url = _url(pg_conninfo)
    console = Console("--audit", url, "--store", url, cwd=tmp_path)
    try:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(console.url, timeout=30) as answer:  # the token, then the cookie
            turns = answer.read().decode()
        with opener.open(f"{console.base}/turns/{turn_id}", timeout=30) as answer:
            page = answer.read().decode()
    finally:
        console.stop()
    assert "Audit chain intact: 5 rows verified." in turns
    assert f'href="/turns/{turn_id}"' in turns
    assert page.count('<li class="call"') == 3
    assert "<pre class=\"result\">echo: &lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "<script>window" not in page


def test_a_row_that_does_not_parse_is_reported_and_every_page_still_answers(
    hostile_logs: tuple[Path, Path, str], tmp_path: Path
) -> None:
    audit, _, turn_id = hostile_logs
    with sqlite3.connect(audit) as conn:
        conn.execute("UPDATE audit_rows SET kind = 'bogus' WHERE idx = 1")
    conn.close()
    console = Console("--audit", str(audit), cwd=tmp_path)
    pages = {}
    try:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        opener.open(console.url, timeout=30).close()
        for path in ("/", f"/turns/{turn_id}", "/gates", "/audit"):
            with opener.open(console.base + path, timeout=30) as answer:
                pages[path] = answer.read().decode()
    finally:
        console.stop()
    for path, page in pages.items():
        assert '<p class="note bad" id="problem">' in page, path
        assert "audit row 1 of" in page, path
    assert "Audit chain broken: row 1" in pages["/audit"]


def test_a_hook_token_from_the_environment_keeps_the_webhook_url_across_restarts(
    hostile_logs: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """``--hook-token-env``: two consoles started one after the other print the same webhook
    URL; an unset or short variable exits 3 before anything is served."""
    audit, _, _ = hostile_logs
    token = "k" * 40
    urls = []
    for _ in range(2):
        console = Console(
            "--audit", str(audit), "--hook-token-env", "HOOK", cwd=tmp_path, env={"HOOK": token}
        )
        try:
            urls.append(console.webhook.split("?token=")[1])
            assert console.token != token  # the access token stays random
        finally:
            console.stop()
    assert urls == [token, token]
    unset = _console("--audit", str(audit), "--hook-token-env", "NO_SUCH_HOOK", cwd=tmp_path)
    assert unset.returncode == 3
    assert "NO_SUCH_HOOK" in unset.stderr
    assert unset.stdout == ""
    short = _console(
        "--audit", str(audit), "--hook-token-env", "HOOK", cwd=tmp_path, env={"HOOK": "short"}
    )
    assert short.returncode == 3
    assert "5 characters" in short.stderr
    assert "short" not in short.stderr.replace("5 characters", "")  # the value is not echoed
