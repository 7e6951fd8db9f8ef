"""The gateway's fast lane answers exactly as the SDK would: the same JSON-RPC lines are sent to
a gateway with the lane (and the direct upstream link) and to one with both off
(``LOOPWARE_GATEWAY_FAST=0``), and every answer must be the same JSON, on both protocol eras,
for good calls, denied and invalid ones, upstream errors and malformed requests. A call the
client cancels is never answered, and a call in flight when the client hangs up is answered
``Connection closed`` on both paths."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from tests.mcp.conftest import logged
from tests.mcp.test_gateway import ROOT, write_config

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
Message = dict[str, Any] | str


class Peer:
    """A client that writes raw lines to a gateway's stdin and reads its answers by id."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.seen: list[dict[str, Any]] = []
        self.raw: dict[object, bytes] = {}  # each answered request's line as written

    async def send(self, message: Message) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8") + b"\n")
        await self.process.stdin.drain()

    async def answer(self, rid: object, timeout: float = 30) -> dict[str, Any]:
        """The answer to request ``rid`` (lines for other ids are kept in `seen`)."""
        for message in self.seen:
            if "method" not in message and message.get("id") == rid:
                self.seen.remove(message)
                return message
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.process.stdout.readline()
                assert line, "the gateway closed its output"
                incoming: dict[str, Any] = json.loads(line)
                if "method" not in incoming and incoming.get("id") == rid:
                    self.raw[json.dumps(rid)] = line
                    return incoming
                self.seen.append(incoming)

    async def rest(self, timeout: float = 30) -> list[dict[str, Any]]:
        """Every line still to come, up to the end of the gateway's output."""
        assert self.process.stdout is not None
        found = list(self.seen)
        async with asyncio.timeout(timeout):
            while line := await self.process.stdout.readline():
                found.append(json.loads(line))
        return found


@asynccontextmanager
async def gateway(config: Path, fast: bool) -> AsyncIterator[Peer]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOOPWARE_GATEWAY_FAST": "1" if fast else "0"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "loopware_cli",
        "gateway",
        "--config",
        str(config),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
        limit=256 * 1024 * 1024,
    )
    try:
        yield Peer(process)
    finally:
        if process.returncode is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


def call(rid: object, name: object, arguments: object = None, meta: object = META) -> Message:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def request(rid: object, method: str, params: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


MODERN_OPENING: list[Message] = [
    request(1, "server/discover", {"_meta": META}),
    request(2, "tools/list", {"_meta": META}),
]
LEGACY_INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "1"},
}


def calls(meta: object) -> list[Message]:
    """Requests every era answers: good, denied, invalid, failing upstream, malformed."""
    return [
        call(10, "fx_echo", {"text": "hello"}, meta),
        call("eleven", "fx_echo", {"text": "é ✓ \\n \u2028", "times": 2}, meta),
        call(12, "fx_echo", {"text": 5}, meta),
        call(13, "fx_echo", {}, meta),
        call(14, "fx_echo", {"text": "a", "extra": 1}, meta),
        call(15, "fx_secret", {}, meta),
        call(16, "fx_nope", {}, meta),
        call(17, "fx_fail", {}, meta),
        call(18, "fx_picture", {}, meta),
        call(19, "fx_count", None, meta),
        call(20, "fx_count", {}, meta),
        call(21, "fx_count", {}, meta),  # over its limit of two
        call(22, "fx_echo", {"text": "hello"}, meta),
        call(23, "fx_echo", {"text": "hello"}, meta),  # the third same call: a repetition
        call(24, "fx_echo", "not an object", meta),
        call(25, 7, {}, meta),
        {"jsonrpc": "2.0", "id": 26, "method": "tools/call"},
        {"jsonrpc": "2.0", "id": 27, "method": "tools/call", "params": [1, 2]},
        {**call(28, "fx_echo", {"text": "x"}, meta), "extra": True},  # type: ignore[dict-item]
        {"jsonrpc": "1.0", "id": 29, "method": "tools/call", "params": {"name": "fx_echo"}},
        call(30, "fx_big", {"mb": 1}, meta),
    ]


WRONG = {"text": "wrong envelope"}
WRONG_ENVELOPES: list[Message] = [
    call(40, "fx_echo", WRONG, {**META, "io.modelcontextprotocol/protocolVersion": "2099"}),
    call(41, "fx_echo", WRONG, {"io.modelcontextprotocol/protocolVersion": VERSION}),
    call(42, "fx_echo", WRONG, None),
    call(43, "fx_echo", WRONG, {**META, "io.modelcontextprotocol/clientInfo": 3}),
]

SEQUENCES: dict[str, list[Message]] = {
    "modern": [*MODERN_OPENING, *calls(META), *WRONG_ENVELOPES],
    "legacy": [
        request(1, "initialize", LEGACY_INIT),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request(2, "tools/list", {}),
        *calls(None),
        call(40, "fx_echo", {"text": "enveloped on a legacy connection"}, META),
    ],
    "legacy-2024": [
        request(1, "initialize", {**LEGACY_INIT, "protocolVersion": "2024-11-05"}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *calls(None)[:12],
    ],
    "call-before-initialize": [
        call(1, "fx_echo", {"text": "too early"}, None),
        request(2, "initialize", LEGACY_INIT),
        call(3, "fx_echo", {"text": "in time"}, None),
        call(4, "fx_echo", {"text": "pipelined"}, None),
    ],
    "junk-first": [
        "{not json",
        '"a string"',
        *MODERN_OPENING,
        call(3, "fx_echo", {"text": "after junk"}),
    ],
}


def answerable(message: Message) -> bool:
    """Whether the SDK answers ``message``: a JSON-RPC 2.0 request it can parse (others are
    dropped unanswered, by both paths)."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and "method" in message
        and isinstance(message.get("id"), str | int)
        and isinstance(message.get("params", {}), dict)
    )


async def exchange(peer: Peer, sequence: Sequence[Message]) -> list[Any]:
    """Send each message, waiting for the answer of each request before the next; then every
    line no request of the sequence waited for."""
    answers: list[Any] = []
    for message in sequence:
        await peer.send(message)
        if answerable(message):
            assert isinstance(message, dict)
            answers.append(await peer.answer(message["id"]))
    answers.append(sorted(peer.seen, key=json.dumps))
    return answers


@pytest.mark.parametrize("name", list(SEQUENCES))
async def test_the_fast_lane_answers_every_request_as_the_sdk_does(
    name: str, tmp_path: Path
) -> None:
    results = {}
    for fast in (True, False):
        folder = tmp_path / str(fast)
        folder.mkdir()
        log = folder / "calls.jsonl"
        async with gateway(write_config(folder, log), fast) as peer:
            results[fast] = await exchange(peer, SEQUENCES[name])
        results[fast].append([c["args"] for c in logged(log)] if log.exists() else [])
    assert results[True] == results[False]
    answers = results[True][:-2]
    assert answers, "the sequence got no answers"
    assert results[True][-2] == [], "a line no request asked for"
    if name == "modern":
        by_id = {a["id"]: a for a in answers}
        assert by_id[10]["result"]["content"] == [{"type": "text", "text": "hello"}]
        assert by_id[15]["result"]["isError"] is True
        assert "error" in by_id[26]
        assert all("error" in by_id[n] for n in (40, 41, 42, 43))
        forwarded = [args.get("text") for args in results[True][-1]]
        assert "hello" in forwarded
        assert WRONG["text"] not in forwarded


@pytest.mark.parametrize("name", ["modern", "legacy"])
async def test_the_fast_lane_writes_the_same_bytes_as_the_sdk(name: str, tmp_path: Path) -> None:
    """Byte for byte: key order, escapes and the ``_meta`` stamp of every answer in the lane
    (plain text built directly, the rest through the SDK's steps) are the SDK's own."""
    meta = META if name == "modern" else None
    again = [call(200 + n, "fx_echo", {"text": f"again {n}"}, meta) for n in range(3)]
    sequence = [*SEQUENCES[name], *again]
    raw = {}
    for fast in (True, False):
        folder = tmp_path / str(fast)
        folder.mkdir()
        async with gateway(write_config(folder, folder / "calls.jsonl"), fast) as peer:
            await exchange(peer, sequence)
            raw[fast] = peer.raw
    assert raw[True] == raw[False]
    assert len(raw[True]) > 20


async def test_random_arguments_get_the_same_answer_on_both_paths(tmp_path: Path) -> None:
    rng = random.Random(16)
    values: list[object] = [
        "",
        "plain",
        "ünï\u0000cödé",
        "x" * 5000,
        0,
        -1,
        2**63,
        1.5,
        True,
        None,
        [],
        {"nested": ["a", 1]},
    ]
    sequence: list[Message] = list(MODERN_OPENING)
    for n in range(60):
        arguments: dict[str, object] = {}
        for key in rng.sample(["text", "times", "other"], rng.randint(0, 3)):
            arguments[key] = rng.choice(values)
        if rng.random() < 0.5:
            arguments["text"] = f"distinct {n}"
        sequence.append(call(100 + n, "fx_echo", arguments))
    results = {}
    for fast in (True, False):
        folder = tmp_path / str(fast)
        folder.mkdir()
        async with gateway(write_config(folder, folder / "calls.jsonl"), fast) as peer:
            results[fast] = await exchange(peer, sequence)
    assert results[True] == results[False]
    texts = [a["result"]["content"][0]["text"] for a in results[True][2:-1] if "result" in a]
    assert any(t.startswith("distinct") for t in texts)
    assert any(t.startswith("Error: E_INVALID_TOOL_ARGS") for t in texts)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "sdk"])
async def test_a_cancelled_call_is_never_answered(fast: bool, tmp_path: Path) -> None:
    config = write_config(tmp_path, tmp_path / "calls.jsonl", timeout=2)
    async with gateway(config, fast) as peer:
        await exchange(peer, MODERN_OPENING)
        await peer.send(call(7, "fx_hang", {}))
        await asyncio.sleep(0.3)  # the call is with the upstream
        cancel = {"requestId": 7, "reason": "the user gave up"}
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        await peer.send(call(8, "fx_echo", {"text": "next"}))
        after = await peer.answer(8)  # runs once the hung call timed out upstream (2 s)
        assert after["result"]["content"][0]["text"] == "next"
        await peer.send(call(9, "fx_echo", {"text": "last"}))
        await peer.answer(9)
        assert all(m.get("id") != 7 for m in peer.seen)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "sdk"])
async def test_a_call_in_flight_when_the_client_hangs_up_is_answered_closed(
    fast: bool, tmp_path: Path
) -> None:
    config = write_config(tmp_path, tmp_path / "calls.jsonl", timeout=30)
    async with gateway(config, fast) as peer:
        await exchange(peer, MODERN_OPENING)
        await peer.send(call(7, "fx_hang", {}))
        await asyncio.sleep(0.3)
        assert peer.process.stdin is not None
        peer.process.stdin.close()
        rest = await peer.rest()
    (closed,) = [m for m in rest if m.get("id") == 7]
    assert closed["error"]["message"] == "Connection closed"


async def test_concurrent_calls_are_each_answered_once(tmp_path: Path) -> None:
    async with gateway(write_config(tmp_path, tmp_path / "calls.jsonl"), True) as peer:
        await exchange(peer, MODERN_OPENING)
        for n in range(40):
            await peer.send(call(n + 100, "fx_echo", {"text": f"c{n}"}))
        answers = [await peer.answer(n + 100) for n in range(40)]
    assert [a["result"]["content"][0]["text"] for a in answers] == [f"c{n}" for n in range(40)]
    assert not peer.seen


async def test_a_lone_surrogate_argument_is_an_error_answer_and_the_upstream_stays(
    tmp_path: Path,
) -> None:
    """``"\\ud800"`` in a call's arguments is valid JSON that UTF-8 cannot carry upstream: that
    call is answered with a clear invalid-arguments error, and the next call goes to the same
    upstream process (the SDK's own parser rejects such a line and leaves it unanswered)."""
    log = tmp_path / "calls.jsonl"
    async with gateway(write_config(tmp_path, log), True) as peer:
        await exchange(peer, MODERN_OPENING)
        await peer.send(call(1, "fx_echo", {"text": "before"}))
        await peer.answer(1)
        line = json.dumps(call(2, "fx_echo", {"text": "a\ud800b"}))
        assert "\\ud800" in line
        await peer.send(line)
        answer = await peer.answer(2)
        await peer.send(call(3, "fx_echo", {"text": "after"}))
        after = await peer.answer(3)
    result = answer["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Error: E_INVALID_TOOL_ARGS")
    assert "lone surrogate" in result["content"][0]["text"]
    assert after["result"]["content"][0]["text"] == "after"
    sent = logged(log)
    assert [c["args"]["text"] for c in sent] == ["before", "after"]
    assert sent[0]["pid"] == sent[1]["pid"], "the upstream was restarted"
