"""The gateway's approvers: a terminal prompt (on a pseudo-terminal here), failures reject, and
the webhook's body names the call and its caller; a rejection's reason reaches the gate."""

from __future__ import annotations

import json
import os
import select
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest

from loopware_cli._gateway_approval import CALLER, build_approver
from loopware_cli._gateway_config import ApprovalConfig
from pipeline import Gate
from pipeline.errors import PolicyViolationError


def gate() -> Gate[bool]:
    payload = {"tool": "git_add", "call_id": "c1", "args": {"files": ["a.txt"]}}
    return Gate(id="c1", reason="approve git_add", payload=payload, schema=bool)


@pytest.mark.parametrize(("answer", "approved"), [(b"y\n", True), (b"yes\n", True), (b"\n", False)])
async def test_the_terminal_prompt_asks_and_reads_the_answer(answer: bytes, approved: bool) -> None:
    master, replica = os.openpty()
    try:
        approver = build_approver(
            ApprovalConfig(tools=("git_add",), prompt=True), os.ttyname(replica)
        )
        os.write(master, answer)
        assert await approver(gate()) is approved
        asked = ""
        while "[y/N]" not in asked and select.select([master], [], [], 5)[0]:
            asked += os.read(master, 4096).decode()  # the echoed answer may come first
        assert "allow git_add" in asked
        assert "a.txt" in asked
    finally:
        os.close(master)
        os.close(replica)


async def test_no_terminal_means_no_approval_through_the_gate() -> None:
    approver = build_approver(ApprovalConfig(tools=("x",), prompt=True), "/nonexistent/tty")
    with pytest.raises(FileNotFoundError):
        await approver(gate())  # ApprovalGate turns an approver's exception into a rejection


async def test_a_command_that_fails_rejects() -> None:
    approver = build_approver(
        ApprovalConfig(tools=("x",), command=(sys.executable, "-c", "import sys; sys.exit(1)"))
    )
    assert await approver(gate()) is False


async def test_an_unreachable_webhook_raises_and_so_rejects() -> None:
    approver = build_approver(
        ApprovalConfig(tools=("x",), webhook="http://127.0.0.1:9/approve", timeout=2)
    )
    with pytest.raises(OSError, match=r"refused|URLError|Errno"):
        await approver(gate())


class _Hook(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []
    answer: ClassVar[dict[str, Any]] = {}

    def do_POST(self) -> None:
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        data = json.dumps(self.answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


async def test_the_webhook_body_names_the_call_and_who_makes_it_and_a_reason_reaches_the_gate(
    hook: str,
) -> None:
    approver = build_approver(ApprovalConfig(tools=("x",), webhook=hook, timeout=7))
    _Hook.answer = {"approved": False, "reason": "not today", "by": "console:alice"}
    token = CALLER.set({"principal": "p1", "conversation": "p1#c", "turn_id": "t1"})
    try:
        held = gate()
        assert await approver(held) is False
    finally:
        CALLER.reset(token)
    assert _Hook.bodies[-1] == {
        "tool": "git_add",
        "call_id": "c1",
        "args": {"files": ["a.txt"]},
        "reason": "approve git_add",
        "gate": "c1",
        "principal": "p1",
        "conversation": "p1#c",
        "turn_id": "t1",
        "timeout": 7,
    }
    with pytest.raises(PolicyViolationError, match=r"rejected by console:alice: not today"):
        await held.wait()
    _Hook.answer = {"approved": True}
    assert await approver(gate()) is True
    assert _Hook.bodies[-1]["principal"] is None  # outside a gateway call: nobody named
