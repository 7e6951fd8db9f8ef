"""Which stdin lines the gateway's fast lane takes, and what it writes back.

The lane is driven line by line against a gateway double (its ``call`` answers like a forwarded
call), so these tests show the lane really is the one answering plain calls once the era is
settled, and leaves everything else to the SDK (test_gateway_fast.py shows the answers match)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.server.lowlevel import Server

from loopware_cli._gateway_fast import FastLane
from pipeline.calls import ToolCall
from tests.mcp.test_gateway_fast import META, call, request


def _record(name: str, args: dict[str, Any]) -> ToolCall:
    """The record of a call that was forwarded and ran (what the lane answers from)."""
    return ToolCall.completed(id="c1", tool=name or "x", args=args, results="echoed", ran=True)


class _Gateway:
    """Answers every call like a forwarded one; a call to ``slow`` waits until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.release = asyncio.Event()

    async def call(self, key: str, name: str, args: dict[str, Any]) -> tuple[Any, Any]:
        self.calls.append((key, name, args))
        if name == "slow":
            await self.release.wait()
        text = str(args.get("text", ""))
        return _record(name, args), types.CallToolResult(
            content=[types.TextContent(type="text", text=text)]
        )

    def queue_call(self, key: str, name: str, args: dict[str, Any]) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self.call(key, name, args))


def line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def lane() -> tuple[FastLane, _Gateway, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []
    double = _Gateway()
    server = Server("lane-test")
    fast = FastLane(double, server, lambda data: written.append(json.loads(data)))  # type: ignore[arg-type]
    return fast, double, written


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_on_a_modern_connection_plain_calls_are_answered_by_the_lane() -> None:
    fast, double, written = lane()
    assert not fast.take(line(request(1, "server/discover", {"_meta": META})))
    assert fast.era == "modern"
    assert fast.take(line(call(2, "echo", {"text": "hi"})))
    assert fast.take(line(call("three", "echo", None)))
    await settle()
    assert [w["id"] for w in written] == [2, "three"]
    first = written[0]["result"]
    assert first["content"] == [{"type": "text", "text": "hi"}]
    assert first["resultType"] == "complete"
    assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "lane-test"
    assert [c[0] for c in double.calls] == ["stdio", "stdio"]


NOT_PLAIN: list[Any] = [
    call(5, "echo", {"text": "x"}, None),  # no envelope
    call(5, "echo", {"text": "x"}, {"io.modelcontextprotocol/protocolVersion": "2099"}),
    call(5, "echo", {"text": "x"}, {**META, "io.modelcontextprotocol/protocolVersion": "2099"}),
    call(5, "echo", {"text": "x"}, {**META, "io.modelcontextprotocol/clientInfo": 3}),
    call(5, 7, {}),  # a name that is not a string
    call(5, "echo", "not an object"),
    call(True, "echo", {}),
    call(None, "echo", {}),
    {**call(5, "echo", {}), "extra": 1},  # type: ignore[dict-item]
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call"},
    request(5, "tools/list", {"_meta": META}),
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": "tools/call"}},
]
NOT_PLAIN_IDS = [
    "no-envelope",
    "bad-version",
    "bad-version-full-envelope",
    "client-info-not-object",
    "name-not-string",
    "arguments-not-object",
    "bool-id",
    "null-id",
    "extra-key",
    "no-params",
    "other-method",
    "notification",
]


@pytest.mark.parametrize("message", NOT_PLAIN, ids=NOT_PLAIN_IDS)
async def test_anything_but_a_plain_call_goes_to_the_sdk(message: dict[str, Any]) -> None:
    fast, double, written = lane()
    fast.take(line(request(1, "server/discover", {"_meta": META})))
    assert not fast.take(line(message))
    assert not fast.take(b"{not json\n")
    await settle()
    assert written == []
    assert double.calls == []


@pytest.mark.parametrize("message", NOT_PLAIN, ids=NOT_PLAIN_IDS)
async def test_after_an_accepted_call_one_unlike_it_still_goes_to_the_sdk(
    message: dict[str, Any],
) -> None:
    """The lane remembers the envelope it accepted, and only a plain call with the same one
    skips the SDK's checks: any other call is checked again, and these fail."""
    fast, _, written = lane()
    fast.take(line(request(1, "server/discover", {"_meta": META})))
    assert fast.take(line(call(2, "echo", {"text": "first"})))
    assert not fast.take(line(message))
    assert fast.take(line(call(3, "echo", {"text": "same envelope"})))
    await settle()
    assert [w["id"] for w in written] == [2, 3]


async def test_on_a_handshake_connection_the_lane_waits_for_the_initialize_answer() -> None:
    fast, _, written = lane()
    init = {
        "protocolVersion": "2024-11-05",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    assert not fast.take(line(request(1, "initialize", init)))
    assert fast.era == "legacy"
    assert not fast.take(line(call(2, "echo", {"text": "early"}, None)))  # the SDK answers it
    fast.sent(line({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2024-11-05"}}))
    assert fast.take(line(call(3, "echo", {"text": "now"}, None)))
    assert not fast.take(line(call(4, "echo", {"text": "enveloped"})))
    await settle()
    (answer,) = written
    assert answer["id"] == 3
    assert "resultType" not in answer["result"]  # not in the 2024-11-05 schema
    assert "_meta" not in answer["result"]  # no serverInfo stamp before 2026


async def test_a_cancelled_call_is_not_answered_and_the_notice_still_reaches_the_sdk() -> None:
    fast, double, written = lane()
    fast.take(line(request(1, "server/discover", {"_meta": META})))
    assert fast.take(line(call(2, "slow", {})))
    await settle()
    assert fast.in_flight == 1
    notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "2"}}
    assert not fast.take(line(notice))
    double.release.set()
    await settle()
    assert written == []
    assert fast.in_flight == 0


async def test_calls_still_running_at_close_are_answered_connection_closed() -> None:
    fast, _, written = lane()
    fast.take(line(request(1, "server/discover", {"_meta": META})))
    fast.take(line(call(2, "slow", {})))
    await settle()
    await fast.aclose()
    assert written == [
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "Connection closed"}}
    ]


async def test_only_a_request_the_sdk_can_parse_decides_the_era() -> None:
    fast, _, _ = lane()
    bad = {"jsonrpc": "1.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    assert not fast.take(line(bad))
    assert not fast.take(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert not fast.take(b"[1, 2]\n")
    assert fast.era == "unsettled"
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}
    assert not fast.take(line(request(2, "initialize", init)))
    assert fast.era == "legacy"
    assert not fast.take(line(call(3, "echo", {"text": "enveloped"})))  # the SDK refuses it
