"""A hostile scripted turn: every way a call can be refused, one call per model step.

Used by ``tests/cli/test_one_verdict.py`` through ``loopware run`` (``--tools
tests.data.hostile_turn:tools -m tests.data.hostile_turn:stack``), replay and tracing. Each
attribute is what ``--tools`` / ``--middleware`` accept, or plain data.
"""

from __future__ import annotations

import json
from typing import Any, Final

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit, ToolPolicy
from pipeline import Tool, tool
from pipeline.models import ModelResponse, ProposedToolCall

USER_INPUT: Final = "Refund order A, and clean up the server while you are at it."

CALLS: Final = (
    ("c1", "lookup", json.dumps({"order_id": "A"}), "allowed"),
    ("c2", "shell", json.dumps({"cmd": "rm -rf /tmp/cache"}), "denied"),  # the policy's
    ("c3", "delete_everything", "{}", "invalid"),  # a name no tool has
    ("c4", "lookup", json.dumps({"order_id": 5}), "invalid"),  # fails the schema
    ("c5", "lookup", '{"order_id": ', "invalid"),  # not JSON
    ("c6", "lookup", json.dumps({"order_id": "A"}), "denied"),  # a repeat, blocked
    ("c7", "search", json.dumps({"q": "refund policy"}), "allowed"),  # uses up the limit
    ("c8", "search", json.dumps({"q": "refund rules"}), "denied"),  # the tool it hid
    ("c9", "refund", json.dumps({"order_id": "A", "amount": 5.0}), "rejected"),  # approval: no
)
"""``(call id, tool, argument text, the verdict every consumer must show)``, in order."""


def tools() -> list[Tool[Any]]:
    """The agent's tools (a factory, so each run gets its own)."""

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: paid twice"

    @tool
    def search(q: str) -> str:
        """Search the help centre."""
        return f"3 articles about {q}"

    @tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded {amount} on {order_id}"

    @tool
    def shell(cmd: str) -> str:
        """Run a shell command."""
        return "done"

    return [lookup, search, refund, shell]


def stack() -> list[object]:
    """No shell; one search per turn; a repeated call is blocked; refunds need an approval the
    approver refuses."""
    return [
        ToolPolicy(deny=["shell*"]),
        ToolCallLimit({"search": 1}),
        RepetitionDetector(threshold=2),
        ApprovalGate(["refund"], approver=lambda gate: False),
    ]


def script() -> list[ModelResponse]:
    """The model: one call of ``CALLS`` per step, then an answer."""
    steps = [
        ModelResponse(tool_calls=[ProposedToolCall(cid, name, arguments)])
        for cid, name, arguments, _ in CALLS
    ]
    return [*steps, ModelResponse(text="I could not do all of that.")]
