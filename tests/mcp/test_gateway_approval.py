"""The gateway's approvers: a terminal prompt (on a pseudo-terminal here), and failures reject."""

from __future__ import annotations

import os
import select
import sys

import pytest

from loopware_cli._gateway_approval import build_approver
from loopware_cli._gateway_config import ApprovalConfig
from pipeline import Gate


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
