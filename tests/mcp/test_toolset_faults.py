"""`MCPToolset` against a misbehaving server: hostile listings, errors, hangs, deaths, huge
results, and both lifetimes (explicit and owned by the runner), over stdio and HTTP."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from pipeline.artifacts import SpooledArtifact
from pipeline.errors import InvalidToolError
from pipeline.events import Log
from pipeline.mcp import MCPServerError, MCPTimeoutError, MCPToolset
from pipeline.stores import FileSpoolStore
from tests.mcp.conftest import (
    FIXTURE,
    fixture_command,
    logged,
    media_of,
    runner,
    scripted,
    text_of,
)


async def test_hostile_tools_are_skipped_or_renamed_with_a_logged_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="pipeline.mcp")
    async with MCPToolset(fixture_command(None, "--hostile")) as tools:
        names = [t.name for t in tools]
        skipped, renamed = tools.skipped, tools.renamed
    assert "echo" in names
    assert "bad_schema" not in names
    assert "not_an_object" not in names
    assert "not a valid JSON Schema" in skipped["bad_schema"]
    assert "not a valid JSON Schema" in skipped["not_an_object"]
    assert renamed["files/read.v2"] == "files_read_v2"
    assert "already has" in skipped["files_read_v2"]
    assert "no character" in skipped["..."]
    assert len(renamed["t" * 100]) == 64
    logs = caplog.text
    assert "'bad_schema' skipped" in logs
    assert "renamed to 'files_read_v2'" in logs


async def test_results_errors_and_media_become_records(call_log: Path) -> None:
    async with MCPToolset(fixture_command(call_log), prefix="fx_") as tools:
        executor = scripted(
            [
                ("e", "fx_echo", '{"text": "ab", "times": 2}'),
                ("f", "fx_fail", "{}"),
                ("p", "fx_picture", "{}"),
                ("x", "fx_echo", '{"text": "ab", "times": 0}'),
            ]
        )
        result = await runner(executor, tools).run("go")
    echo, fail, picture, invalid = result.tool_calls
    assert text_of(echo) == "abab"
    assert echo.inline
    assert fail.is_error
    assert fail.results == "Error: E_MCP_TOOL_ERROR: disk on fire"
    caption, image = media_of(picture)
    assert image.kind == "image"
    assert image.trust_tier == "third-party-private"
    assert caption.data == b"a red pixel"
    assert invalid.is_error
    assert "E_INVALID_TOOL_ARGS" in text_of(invalid)
    assert [c["tool"] for c in logged(call_log)] == ["echo", "fail", "picture"]  # never "x"
    assert logged(call_log)[0]["args"] == {"text": "ab", "times": 2}


async def test_a_server_that_never_answers_times_out_and_the_next_call_still_works() -> None:
    async with MCPToolset(fixture_command(None), timeout=1.0) as tools:
        executor = scripted([("h", "hang", "{}")], [("e", "echo", '{"text": "still here"}')])
        started = time.monotonic()
        result = await runner(executor, tools).run("go")
        elapsed = time.monotonic() - started
    hang, echo = result.tool_calls
    assert hang.is_error
    assert "E_MCP_TIMEOUT" in text_of(hang)
    assert "within 1 s" in text_of(hang)
    assert not echo.is_error
    assert text_of(echo) == "still here"
    assert elapsed < 20


async def test_a_server_dying_mid_turn_is_an_error_call_and_the_next_turn_reconnects(
    call_log: Path,
) -> None:
    async with MCPToolset(fixture_command(call_log), timeout=10) as tools:
        executor = scripted([("d", "die", "{}")], [("c", "count", "{}")])
        first = await asyncio.wait_for(runner(executor, tools).run("go"), 30)
        died, after = first.tool_calls
        assert died.is_error
        assert "E_MCP_SERVER" in text_of(died)
        assert "died" in text_of(died)
        assert not after.is_error
        assert text_of(after) == "1"
        second = await runner(scripted([("c2", "count", "{}")]), tools).run("again")
    assert text_of(second.tool_calls[0]) == "2"
    pids = [c["pid"] for c in logged(call_log)]
    assert pids[0] != pids[1] == pids[2]


async def test_a_result_over_100_mb_is_spooled_to_disk_not_held_in_memory(tmp_path: Path) -> None:
    spool = FileSpoolStore(tmp_path / "spool")
    async with MCPToolset(fixture_command(None), timeout=300) as tools:
        run = runner(scripted([("b", "big", '{"mb": 101}')]), tools, spool=spool)
        result = await run.run("go")
        gc.collect()
        large = [
            o
            for o in gc.get_objects()
            if isinstance(o, str | bytes | list | dict) and sys.getsizeof(o) > 1024 * 1024
        ]
    (big,) = result.tool_calls
    assert not big.is_error
    assert not big.inline
    artifact = big.results
    assert isinstance(artifact, SpooledArtifact)
    assert artifact.byte_length() > 100 * 1024 * 1024
    assert artifact.tail(2) == ["x" * 1023, ""]
    assert sum(f.stat().st_size for f in (tmp_path / "spool").rglob("*") if f.is_file()) > 100e6
    assert large == []  # no object holds the body (not even a copy): it is on disk


async def test_a_server_that_cannot_start_is_a_typed_error() -> None:
    with pytest.raises(MCPServerError, match="cannot connect"):
        async with MCPToolset(
            [sys.executable, "-c", "import sys; sys.exit(1)"], connect_timeout=10
        ):
            pass


async def test_a_server_that_never_finishes_its_handshake_times_out() -> None:
    with pytest.raises(MCPTimeoutError, match="handshake"):
        async with MCPToolset(
            [sys.executable, "-c", "import time; time.sleep(60)"], connect_timeout=1
        ):
            pass


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"timeout": 0}, "timeout"),
        ({"connect_timeout": True}, "connect_timeout"),
        ({"allow": "echo"}, "allow"),
        ({"trust_tier": "public"}, "trust_tier"),
        ({"prefix": 3}, "prefix"),
    ],
    ids=["zero-timeout", "bool-timeout", "allow-string", "bad-tier", "prefix-int"],
)
def test_bad_options_are_refused_up_front(options: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidToolError) as info:
        MCPToolset(["python", "x.py"], **options)  # type: ignore[arg-type]
    assert info.value.field == field


def test_an_empty_command_is_refused() -> None:
    with pytest.raises(InvalidToolError):
        MCPToolset([])


async def test_the_runner_owns_the_lifetime_when_the_toolset_is_middleware(call_log: Path) -> None:
    tools = MCPToolset(fixture_command(call_log), prefix="fx_", trust_tier="third-party-public")

    def is_open() -> bool:
        return tools.connected

    assert not is_open()
    assert tools.tools == ()
    try:
        run = runner(
            scripted([("p", "fx_picture", "{}"), ("d", "fx_die", "{}")]), (), middleware=[tools]
        )
        first = await run.run("go")
        assert not is_open()  # the server died in the turn
        picture, died = first.tool_calls
        assert media_of(picture)[1].trust_tier == "third-party-public"
        assert died.is_error
        again = runner(scripted([("c", "fx_count", "{}")]), (), middleware=[tools])
        second = await again.run("again")
        assert text_of(second.tool_calls[0]) == "1"
        assert is_open()
    finally:
        await tools.aclose()
    assert not is_open()


async def test_an_unreachable_server_leaves_the_turn_without_its_tools() -> None:
    tools = MCPToolset([sys.executable, "-c", "pass"], connect_timeout=5)
    warnings: list[Log] = []
    run = runner(scripted([("e", "echo", "{}")]), (), middleware=[tools])
    run.on(Log, lambda e: warnings.append(e) if e.kind == "mcp.unavailable" else None)
    result = await run.run("go")
    assert result.status == "completed"
    assert result.tool_calls[0].is_error
    assert "unknown tool" in text_of(result.tool_calls[0])
    assert warnings
    assert "cannot connect" in warnings[0].message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_http_server(call_log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the fixture server over streamable HTTP; return it and its URL once it listens."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, FIXTURE, "--http", str(port), "--log", str(call_log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError("the fixture HTTP server did not start listening") from None
            time.sleep(0.1)


@pytest.fixture
def http_server(call_log: Path) -> Iterator[str]:
    process, url = start_http_server(call_log)
    try:
        yield url
    finally:
        process.kill()
        process.wait()


async def test_a_streamable_http_server_works_like_a_stdio_one(
    http_server: str, call_log: Path
) -> None:
    async with MCPToolset(http_server, prefix="web_", timeout=1) as tools:
        executor = scripted([("e", "web_echo", '{"text": "over http"}'), ("h", "web_hang", "{}")])
        result = await runner(executor, tools).run("go")
    echo, hang = result.tool_calls
    assert text_of(echo) == "over http"
    assert hang.is_error
    assert "E_MCP_TIMEOUT" in text_of(hang)
    assert [c["tool"] for c in logged(call_log)] == ["echo", "hang"]


async def test_an_http_server_that_goes_away_is_a_clear_error_not_a_hang(
    call_log: Path,
) -> None:
    process, url = start_http_server(call_log)
    try:
        async with MCPToolset(url, timeout=30) as tools:
            process.kill()
            process.wait()
            started = time.monotonic()
            result = await runner(
                scripted([("a", "echo", '{"text": "x"}')], [("b", "echo", '{"text": "y"}')]), tools
            ).run("go")
            elapsed = time.monotonic() - started
    finally:
        process.kill()
        process.wait()
    first, second = result.tool_calls
    assert first.is_error
    assert "E_MCP_SERVER" in text_of(first)
    assert second.is_error
    assert "E_MCP_SERVER" in text_of(second)
    assert elapsed < 25  # refused connections fail fast, well before the 30 s call timeout


_LEFT_OPEN = """
import asyncio, logging, sys
from pipeline.mcp import MCPToolset
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

async def main() -> None:
    tools = MCPToolset({command!r})
    await tools.__aenter__()  # never closed: asyncio.run cancels the connection at its end
    print(len(list(tools)), flush=True)

asyncio.run(main())
"""


def test_a_loop_ending_with_the_toolset_open_logs_no_disconnect(tmp_path: Path) -> None:
    """A connection cancelled because its loop ended is not reported as the server failing."""
    script = tmp_path / "left_open.py"
    script.write_text(_LEFT_OPEN.format(command=fixture_command(None)))
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 0  # it did connect and list the tools
    assert "disconnected" not in done.stderr
