"""`loopware gateway`, driven as a subprocess by the mcp SDK's own client, over stdio and HTTP:
denied calls never reach the upstream (its call log proves it), limits and approvals hold, the
audit chain verifies, and a killed or stuck upstream gives a clear error instead of a hang."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from loopware_cli._gateway import Gateway, call_result, forwarded
from loopware_cli._gateway_config import GatewayConfig, UpstreamConfig
from middleware.audit import JsonlAuditSink
from pipeline.calls import Decision, ToolCall
from tests.mcp.conftest import fixture_command, logged

ROOT = Path(__file__).resolve().parents[2]


def write_config(folder: Path, log: Path, extra: str = "", timeout: float = 10) -> Path:
    command = json.dumps(fixture_command(log))
    config = folder / "gateway.toml"
    config.write_text(
        f"""
[[upstream]]
name = "fixture"
command = {command}
prefix = "fx_"
timeout = {timeout}

[policy]
deny = ["fx_secret"]

[limits]
per_tool = {{ fx_count = 2 }}

[repetition]
threshold = 3

[audit]
path = "audit.jsonl"
{extra}
"""
    )
    return config


def gateway_env() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT)}


@asynccontextmanager
async def stdio_gateway(config: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "loopware_cli", "gateway", "--config", str(config)],
        env=gateway_env(),
        cwd=str(ROOT),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        yield client


def texts(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def verified(audit: Path) -> bool:
    """True when the audit chain at ``audit`` verifies."""
    sink = JsonlAuditSink(audit)
    try:
        return bool(sink.verify())
    finally:
        sink.close()


def rows_by_call(audit: Path) -> dict[str, dict[str, Any]]:
    """The last audit row of each call id (a call's final form)."""
    last: dict[str, dict[str, Any]] = {}
    sink = JsonlAuditSink(audit)
    try:
        rows = sink.rows()
    finally:
        sink.close()
    for row in rows:
        if row.entry.kind == "tool_call" and row.entry.call_id is not None:
            last[row.entry.call_id] = {
                "tool": row.entry.tool,
                "decision": row.entry.decision,
                "is_error": row.entry.is_error,
                "conversation": row.entry.conversation_id,
            }
    return last


async def test_denied_limited_and_invalid_calls_never_reach_the_upstream(
    tmp_path: Path, call_log: Path
) -> None:
    config = write_config(tmp_path, call_log)
    async with stdio_gateway(config) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert "fx_echo" in listed
        assert "fx_secret" not in listed  # a denied tool is not even offered
        echo = await client.call_tool("fx_echo", {"text": "hi"})
        assert not echo.is_error
        assert texts(echo) == "hi"
        secret = await client.call_tool("fx_secret", {})
        assert secret.is_error
        assert texts(secret).startswith(
            "Error: E_TOOL_UNAVAILABLE: tool 'fx_secret' is no longer available in this turn "
            "(loopware.policy: matches deny pattern 'fx_secret')"
        )
        invalid = await client.call_tool("fx_echo", {"text": 5})
        assert invalid.is_error
        assert "E_INVALID_TOOL_ARGS" in texts(invalid)
        counts = [await client.call_tool("fx_count", {}) for _ in range(3)]
        assert [texts(c) for c in counts[:2]] == ["2", "3"]
        assert counts[2].is_error  # the limit of two hid the tool
        assert texts(counts[2]).startswith("Error: E_TOOL_UNAVAILABLE: tool 'fx_count'")
        picture = await client.call_tool("fx_picture", {})
        assert [b.type for b in picture.content] == ["text", "image"]  # the upstream's own result
        failed = await client.call_tool("fx_fail", {})
        assert failed.is_error
        assert "disk on fire" in texts(failed)
    reached = [c["tool"] for c in logged(call_log)]
    assert reached == ["echo", "count", "count", "picture", "fail"]
    audit = tmp_path / "audit.jsonl"
    assert verified(audit)
    rows = rows_by_call(audit)
    assert len(rows) == 8  # every call, allowed or denied
    assert {r["conversation"] for r in rows.values()} == {"stdio"}
    errors = [(r["tool"], r["is_error"]) for r in rows.values()]
    assert ("fx_secret", True) in errors
    assert ("fx_count", True) in errors


async def test_repeating_a_call_is_blocked_before_it_is_forwarded(
    tmp_path: Path, call_log: Path
) -> None:
    async with stdio_gateway(write_config(tmp_path, call_log)) as client:
        results = [await client.call_tool("fx_echo", {"text": "same"}) for _ in range(3)]
    assert [r.is_error for r in results] == [False, False, True]
    assert texts(results[2]) == (
        "Error: E_CALL_DENIED: loopware.repetition denied the call to 'fx_echo': the same call "
        "would be made 3 times (threshold 3); it was not run"
    )
    assert len(logged(call_log)) == 2


async def test_a_killed_upstream_is_a_clear_error_and_the_next_call_reconnects(
    tmp_path: Path, call_log: Path
) -> None:
    async with stdio_gateway(write_config(tmp_path, call_log, timeout=60)) as client:
        pending = asyncio.create_task(client.call_tool("fx_hang", {}))
        deadline = time.monotonic() + 30
        while not logged(call_log):  # the call reached the upstream
            assert time.monotonic() < deadline, "the call never reached the upstream"
            await asyncio.sleep(0.05)
        upstream = logged(call_log)[0]["pid"]
        started = time.monotonic()
        os.kill(upstream, signal.SIGKILL)
        killed = await asyncio.wait_for(pending, 30)
        elapsed = time.monotonic() - started
        later = await asyncio.wait_for(client.call_tool("fx_echo", {"text": "later"}), 30)
    assert elapsed < 10  # well before the 60 s call timeout: the death is noticed, not waited out
    assert killed.is_error
    assert "E_MCP_SERVER" in texts(killed)
    assert "died during the call to 'hang'" in texts(killed)
    assert texts(later) == "later"
    assert logged(call_log)[-1]["pid"] != upstream


async def test_an_upstream_dying_mid_call_or_hanging_never_hangs_the_client(
    tmp_path: Path, call_log: Path
) -> None:
    async with stdio_gateway(write_config(tmp_path, call_log, timeout=1)) as client:
        died = await asyncio.wait_for(client.call_tool("fx_die", {}), 30)
        hung = await asyncio.wait_for(client.call_tool("fx_hang", {}), 30)
        alive = await client.call_tool("fx_echo", {"text": "ok"})
    assert died.is_error
    assert "E_MCP_SERVER" in texts(died)
    assert "died during the call" in texts(died)
    assert hung.is_error
    assert "E_MCP_TIMEOUT" in texts(hung)
    assert texts(alive) == "ok"
    assert verified(tmp_path / "audit.jsonl")


async def test_approval_by_command_forwards_only_approved_calls(
    tmp_path: Path, call_log: Path
) -> None:
    approver = tmp_path / "approve.py"
    approver.write_text(
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        "sys.exit(0 if call['args']['text'] != 'rm -rf /' else 1)\n"
    )
    extra = f"""
[approval]
tools = ["fx_echo"]
command = {json.dumps([sys.executable, str(approver)])}
timeout = 30
"""
    async with stdio_gateway(write_config(tmp_path, call_log, extra)) as client:
        ok = await client.call_tool("fx_echo", {"text": "hello"})
        refused = await client.call_tool("fx_echo", {"text": "rm -rf /"})
    assert texts(ok) == "hello"
    assert refused.is_error
    assert texts(refused).startswith(
        "Error: E_CALL_REJECTED: loopware.approval rejected the call to 'fx_echo': "
    )
    assert texts(refused).endswith("; it was not run")
    assert [c["args"]["text"] for c in logged(call_log)] == ["hello"]
    assert len(rows_by_call(tmp_path / "audit.jsonl")) == 2


class _Approvals(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(body)
        answer = json.dumps({"approved": body["args"]["text"] == "fine"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Approvals)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/approve"
    finally:
        server.shutdown()
        server.server_close()


async def test_approval_by_webhook(tmp_path: Path, call_log: Path, webhook: str) -> None:
    extra = f'\n[approval]\ntools = ["fx_echo"]\nwebhook = "{webhook}"\ntimeout = 30\n'
    async with stdio_gateway(write_config(tmp_path, call_log, extra)) as client:
        fine = await client.call_tool("fx_echo", {"text": "fine"})
        bad = await client.call_tool("fx_echo", {"text": "bad"})
    assert not fine.is_error
    assert bad.is_error
    assert [c["args"]["text"] for c in logged(call_log)] == ["fine"]
    assert [s["tool"] for s in _Approvals.seen[-2:]] == ["fx_echo", "fx_echo"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_gateway(tmp_path: Path, call_log: Path) -> Iterator[str]:
    port = _free_port()
    config = write_config(tmp_path, call_log)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loopware_cli",
            "gateway",
            "--config",
            str(config),
            "--http",
            f"127.0.0.1:{port}",
        ],
        env={**os.environ, **gateway_env()},
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, "the gateway exited"
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_over_http_without_auth_every_client_is_the_one_local_principal(
    http_gateway: str, tmp_path: Path, call_log: Path
) -> None:
    """Without [auth] nobody says who they are: all clients share one principal's limits (a
    second client cannot reset them, ``tests/mcp/test_gateway_http_auth.py`` has the rest)."""
    async with Client(http_gateway) as first, Client(http_gateway) as second:
        a = [texts(await first.call_tool("fx_count", {})) for _ in range(2)]
        b = await second.call_tool("fx_count", {})  # the same principal: the limit is used up
        denied = await second.call_tool("fx_secret", {})
    assert a == ["1", "2"]
    assert b.is_error
    assert denied.is_error
    assert [c["tool"] for c in logged(call_log)] == ["count"] * 2
    rows = rows_by_call(tmp_path / "audit.jsonl")
    assert {r["conversation"] for r in rows.values()} == {"local"}
    assert verified(tmp_path / "audit.jsonl")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopware_cli", "gateway", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **gateway_env()},
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_bad_config_exits_3_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[[upstream]]\nname = "x"\n')
    done = run_cli("--config", str(config))
    assert done.returncode == 3
    assert "upstream[0]: give exactly one of command and url" in done.stderr


def test_an_upstream_that_cannot_start_exits_1(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(f'[[upstream]]\ncommand = ["{sys.executable}", "-c", "pass"]\n')
    done = run_cli("--config", str(config))
    assert done.returncode == 1
    assert "cannot connect" in done.stderr


def test_a_bad_http_address_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("--config", str(tmp_path / "missing.toml"), "--http", "nowhere")
    assert done.returncode == 2


# -- what the gateway answers, from the call's record (in process) --------------------------------

LOOK_ALIKES = (
    "FX_ECHO",
    "fx_echo ",
    "fx_\u0435cho",  # a Cyrillic ie for the e
    "\uff46\uff58_echo",  # full width
    "fx_echo\u200b",  # a zero-width space
)
"""Names a client may send for ``fx_echo`` (or the denied ``fx_secret``'s look-alike)."""


@asynccontextmanager
async def in_process(call_log: Path) -> AsyncIterator[Gateway]:
    """A gateway in this process over the fixture server (no audit: that is the audit's test)."""
    upstream = UpstreamConfig(name="fixture", server=tuple(fixture_command(call_log)), prefix="fx_")
    gateway = Gateway(GatewayConfig(upstreams=(upstream,), deny=("fx_secret",)))
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.aclose()


@pytest.mark.parametrize("name", [*LOOK_ALIKES, "FX_SECRET"])
async def test_a_look_alike_name_is_never_forwarded_and_its_record_says_not_run(
    name: str, call_log: Path
) -> None:
    """A look-alike of an offered (or a denied) tool is a name no tool has: its record reads
    invalid, not run, decided by the registry; the answer is that record's error; the upstream
    never hears of it. The real name is forwarded and reads allowed."""
    async with in_process(call_log) as gateway:
        record, raw = await gateway.call("client", name, {"text": "hi"})
        real, real_raw = await gateway.call("client", "fx_echo", {"text": "hi"})
    assert (record.ran, record.verdict, record.is_error) == (False, "invalid", True)
    assert record.deciding is not None
    assert record.deciding.policy == "loopware.registry"
    assert raw is None
    assert not forwarded(record)
    answer = call_result(record, raw)
    assert answer.is_error
    assert texts(answer).startswith(f"Error: E_TOOL_NOT_FOUND: unknown tool {name!r}")
    assert (real.ran, real.verdict, forwarded(real)) == (True, "allowed", True)
    assert call_result(real, real_raw) is real_raw
    assert [c["tool"] for c in logged(call_log)] == ["echo"]


async def test_a_denied_tool_reads_denied_and_not_run(call_log: Path) -> None:
    """The denied tool's own name: denied by the policy that withdrew it, never forwarded."""
    async with in_process(call_log) as gateway:
        record, raw = await gateway.call("client", "fx_secret", {})
    assert (record.ran, record.verdict) == (False, "denied")
    assert record.deciding is not None
    assert record.deciding.policy == "loopware.policy"
    assert (raw, forwarded(record)) == (None, False)
    assert texts(call_result(record, raw)).startswith("Error: E_TOOL_UNAVAILABLE")
    assert logged(call_log) == []


@pytest.mark.parametrize(
    ("decisions", "is_error", "sent"),
    [
        ((), False, "raw"),
        ((Decision(policy="gate", action="approved", reason="ok"),), False, "raw"),
        ((Decision(policy="note", action="warned", reason="odd"),), False, "raw"),
        ((Decision(policy="cache", action="answered", reason="x", when="after"),), False, "text"),
        ((Decision(policy="dlp", action="denied", reason="secret", when="after"),), True, "text"),
    ],
    ids=["allowed", "approved", "warned", "answered-after", "withheld-after"],
)
def test_the_upstreams_result_is_sent_only_when_the_record_says_it_stands(
    decisions: tuple[Decision, ...], is_error: bool, sent: str
) -> None:
    """A call that ran keeps the upstream's own result unless a decision replaced or withheld it
    after the run: then the client reads the record's text, as the model would."""
    import mcp_types as types

    raw = types.CallToolResult(content=[types.TextContent(type="text", text="upstream")])
    record = ToolCall.completed(
        id="c1",
        tool="fx_echo",
        args={"text": "hi"},
        results="Error: withheld" if is_error else "from the record",
        is_error=is_error,
        ran=True,
        decisions=decisions,
    )
    answer = call_result(record, raw)
    if sent == "raw":
        assert answer is raw
    else:
        assert answer is not raw
        assert texts(answer) == record.results
        assert answer.is_error is is_error
