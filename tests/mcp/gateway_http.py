"""Helpers for the gateway-over-HTTP tests: a gateway subprocess, clients with bearer tokens.

The gateway runs as ``python -m loopware_cli gateway --http 127.0.0.1:PORT`` in front of the
counting fixture server (``tests/mcp/fixture_server.py``), its stderr kept in a file so a test
can grep what it logged.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from tests.mcp.conftest import fixture_command

ROOT = Path(__file__).resolve().parents[2]
ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210"
"""Two static tokens; the configuration keeps only their SHA-256 (Alice's) or a file (Bob's)."""


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def write_config(folder: Path, log: Path, *, auth: bool = True, extra: str = "") -> Path:
    """The gateway's TOML: the fixture upstream, ``fx_echo`` limited to 5, repetition at 3."""
    (folder / "bob.token").write_text(BOB + "\n")
    command = json.dumps(fixture_command(log))
    tokens = f"""
[[auth.token]]
principal = "alice"
sha256 = "{sha256(ALICE)}"

[[auth.token]]
principal = "bob"
file = "bob.token"
"""
    config = folder / "gateway.toml"
    config.write_text(
        f"""
[[upstream]]
name = "fixture"
command = {command}
prefix = "fx_"
timeout = 30

[limits]
per_tool = {{ fx_echo = 5 }}

[repetition]
threshold = 3

[audit]
path = "audit.jsonl"
synchronous = "normal"
{tokens if auth else ""}
{extra}
"""
    )
    return config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def http_gateway(config: Path, stderr: Path) -> Iterator[str]:
    """Serve ``config`` over HTTP on 127.0.0.1 for the block; yield the /mcp URL."""
    port = free_port()
    with stderr.open("wb") as err:
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
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert process.poll() is None, stderr.read_text()
                    assert time.monotonic() < deadline, "the gateway never listened"
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@asynccontextmanager
async def client(
    url: str, token: str | None = None, header: Callable[[], str] | None = None
) -> AsyncIterator[Any]:
    """The SDK's `Client` over HTTP with ``token`` as a bearer token, for the block.

    ``header``, when given, names the ``X-Loopware-Conversation`` of every request anew.
    """
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    class Headers(httpx2.Auth):
        def auth_flow(self, request: Any) -> Any:
            if token is not None:
                request.headers["Authorization"] = f"Bearer {token}"
            if header is not None:
                request.headers["X-Loopware-Conversation"] = header()
            yield request

    async with (
        create_mcp_http_client(auth=Headers()) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as mcp,
    ):
        yield mcp


def texts(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
