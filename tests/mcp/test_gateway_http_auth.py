"""The gateway over HTTP lets no one in where they don't belong. Real HTTP on 127.0.0.1, the
SDK's own client, a counting upstream (``fx_echo`` limited to 5, repetition at 3): a client
that renames its conversation on every call, opens fresh sessions or reconnects gets exactly
5 calls through; 20 identical calls get 2; no token or a wrong one is a 401 with nothing
forwarded and an ``access`` audit row; two principals' limits are independent; tokens never
reach the logs; a public address without auth is refused at start."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import httpx2

from middleware.audit import JsonlAuditSink
from tests.mcp.conftest import logged
from tests.mcp.gateway_http import ALICE, BOB, client, http_gateway, texts, write_config
from tests.mcp.test_gateway import run_cli

LIMIT = 5


def audit_rows(folder: Path) -> list[tuple[str, str | None, str | None, str | None]]:
    """(kind, conversation, decision, reason) of every audit row, after the chain verifies."""
    sink = JsonlAuditSink(folder / "audit.jsonl")
    try:
        assert sink.verify().ok
        return [
            (r.entry.kind, r.entry.conversation_id, r.entry.decision, r.entry.reason)
            for r in sink.rows()
        ]
    finally:
        sink.close()


@pytest.fixture
def gateway(tmp_path: Path, call_log: Path) -> object:
    with http_gateway(write_config(tmp_path, call_log), tmp_path / "stderr.txt") as url:
        yield url


async def test_renaming_the_conversation_on_every_call_gets_exactly_the_limit(
    gateway: str, tmp_path: Path, call_log: Path
) -> None:
    names = (f"conversation-{n}" for n in itertools.count())
    async with client(gateway, ALICE, header=lambda: next(names)) as mcp:
        results = [await mcp.call_tool("fx_echo", {"text": f"call {i}"}) for i in range(20)]
    assert [r.is_error for r in results] == [False] * LIMIT + [True] * (20 - LIMIT)
    assert len(logged(call_log)) == LIMIT
    conversations = {r[1] for r in audit_rows(tmp_path) if r[0] == "tool_call"}
    assert len(conversations) > 1  # the names are kept, each within the principal
    assert all(c is not None and c.startswith("alice#conversation-") for c in conversations)


async def test_fresh_sessions_and_reconnects_get_exactly_the_limit(
    gateway: str, call_log: Path
) -> None:
    forwarded = 0
    for i in range(20):  # a fresh MCP session (and connection) per call
        async with client(gateway, ALICE) as mcp:
            forwarded += not (await mcp.call_tool("fx_echo", {"text": f"fresh {i}"})).is_error
    assert forwarded == LIMIT
    assert len(logged(call_log)) == LIMIT
    async with client(gateway, ALICE) as mcp:  # and after a reconnect: still used up
        assert (await mcp.call_tool("fx_echo", {"text": "again"})).is_error
    assert len(logged(call_log)) == LIMIT


async def test_identical_calls_past_the_repetition_threshold_are_not_forwarded(
    gateway: str, call_log: Path
) -> None:
    names = (f"c{n}" for n in itertools.count())
    async with client(gateway, ALICE, header=lambda: next(names)) as mcp:
        results = [await mcp.call_tool("fx_picture", {}) for _ in range(20)]
    assert sum(not r.is_error for r in results) == 2
    assert "E_CALL_DENIED" in texts(results[2])
    assert len(logged(call_log)) == 2


async def test_two_principals_have_independent_limits(gateway: str, call_log: Path) -> None:
    async with client(gateway, ALICE) as alice, client(gateway, BOB) as bob:
        a = [await alice.call_tool("fx_echo", {"text": f"a{i}"}) for i in range(7)]
        b = [await bob.call_tool("fx_echo", {"text": f"b{i}"}) for i in range(7)]
    assert sum(not r.is_error for r in a) == LIMIT
    assert sum(not r.is_error for r in b) == LIMIT
    assert len(logged(call_log)) == 2 * LIMIT


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", f"Bearer {ALICE}x", f"Basic {ALICE}", "Bearer"],
    ids=["none", "wrong", "near-miss", "not-bearer", "empty"],
)
async def test_no_token_or_a_bad_one_is_a_401_with_nothing_forwarded_and_an_audit_row(
    authorization: str | None, tmp_path: Path, call_log: Path
) -> None:
    config = write_config(tmp_path, call_log)
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "fx_echo", "arguments": {"text": "in"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    with http_gateway(config, tmp_path / "stderr.txt") as url:
        async with httpx2.AsyncClient() as http:
            answer = await http.post(url, json=request, headers=headers)
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"].startswith("Bearer ")
        with pytest.raises(Exception):  # noqa: B017, PT011  (the SDK's client: any failure)
            async with client(url, None if authorization is None else "wrong") as mcp:
                await mcp.call_tool("fx_echo", {"text": "in"})
    assert logged(call_log) == []
    refusals = [r for r in audit_rows(tmp_path) if r[0] == "access"]
    assert len(refusals) >= 2
    assert {r[2] for r in refusals} == {"denied"}
    assert all(r[3] is not None and r[3].startswith("HTTP 401") for r in refusals)


async def test_tokens_never_reach_the_logs_or_the_audit(tmp_path: Path, call_log: Path) -> None:
    config = write_config(tmp_path, call_log)
    with http_gateway(config, tmp_path / "stderr.txt") as url:
        async with client(url, ALICE) as mcp:
            assert not (await mcp.call_tool("fx_echo", {"text": "hi"})).is_error
        with pytest.raises(Exception):  # noqa: B017, PT011
            async with client(url, "a-wrong-secret-token") as mcp:
                await mcp.call_tool("fx_echo", {"text": "hi"})
    written = (tmp_path / "stderr.txt").read_text() + (tmp_path / "audit.jsonl").read_text()
    for secret in (ALICE, BOB, "a-wrong-secret-token"):
        assert secret not in written
    assert {r[1] for r in audit_rows(tmp_path) if r[0] == "tool_call"} == {"alice"}


def test_a_public_address_without_auth_is_refused_at_start(tmp_path: Path, call_log: Path) -> None:
    config = write_config(tmp_path, call_log, auth=False)
    done = run_cli("--config", str(config), "--http", "0.0.0.0:8765")
    assert done.returncode == 4
    assert "refusing to serve 0.0.0.0 without authentication" in done.stderr
    assert logged(call_log) == []  # no upstream was even started


async def test_without_auth_every_local_client_is_one_principal(
    tmp_path: Path, call_log: Path
) -> None:
    config = write_config(tmp_path, call_log, auth=False)
    with http_gateway(config, tmp_path / "stderr.txt") as url:
        for i in range(4):
            async with client(url) as first, client(url) as second:
                await first.call_tool("fx_echo", {"text": f"first {i}"})
                await second.call_tool("fx_echo", {"text": f"second {i}"})
    assert len(logged(call_log)) == LIMIT
    assert {r[1] for r in audit_rows(tmp_path) if r[0] == "tool_call"} == {"local"}


async def test_over_http_a_cap_is_a_typed_refusal_and_concurrent_calls_hold_the_limit(
    tmp_path: Path, call_log: Path
) -> None:
    extra = "[caps.principal]\nper_minute = { fx_count = 2 }\n"
    config = write_config(tmp_path, call_log, extra=extra)
    with http_gateway(config, tmp_path / "stderr.txt") as url:
        async with client(url, ALICE) as mcp:
            counts = [await mcp.call_tool("fx_count", {}) for _ in range(3)]
            started = asyncio.get_running_loop().time()
            slow = await asyncio.gather(
                mcp.call_tool("fx_sleep", {"seconds": 1.5, "n": 1}),
                mcp.call_tool("fx_sleep", {"seconds": 1.5, "n": 2}),
            )
            elapsed = asyncio.get_running_loop().time() - started
            echoes = await asyncio.gather(
                *(mcp.call_tool("fx_echo", {"text": f"at once {i}"}) for i in range(20))
            )
    assert [c.is_error for c in counts] == [False, False, True]
    assert texts(counts[2]).startswith("Error: E_CALL_DENIED: loopware.gateway.cap.principal")
    assert "2 of 2 'fx_count' runs for this principal in the last 1 minute" in texts(counts[2])
    assert not any(s.is_error for s in slow)
    assert elapsed < 2.5, elapsed
    assert sum(not e.is_error for e in echoes) == LIMIT
    assert [c["tool"] for c in logged(call_log)].count("echo") == LIMIT
