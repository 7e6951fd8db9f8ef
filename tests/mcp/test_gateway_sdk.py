"""The gateway answers every request exactly as the mcp SDK's own server does: the same raw
JSON-RPC lines go to the gateway and to a plain SDK proxy (``bench/mcp_gateway_proxy.py``, no
policy) in front of the same fixture upstream, and every answer must be the same bytes, on both
protocol eras, for good calls, malformed requests, wrong envelopes, a request the SDK cannot
parse (a 1,000-deep nested call, in one write with the plain call after it), random arguments
and large results. The only answers allowed to differ are the calls loopware decides (denied,
invalid, repeated, failed upstream): those are ``isError`` results carrying loopware's typed
error; and ``tools/list`` shows only what the policy permits. A call the client cancels is
never answered, and a call in flight when the client hangs up is answered ``Connection
closed``, as the SDK does."""

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

from bench.mcp_gateway_proxy import proxy_command
from tests.mcp.conftest import fixture_command, logged
from tests.mcp.test_gateway import ROOT, write_config

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
GATEWAY_NAME = "loopware-gateway"
Message = dict[str, Any] | str


class Peer:
    """A client that writes raw lines to a server's stdin and reads its answers by id."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.seen: list[dict[str, Any]] = []
        self.raw: dict[str, bytes] = {}  # each answered request's line as written, by id

    async def send(self, *messages: Message) -> None:
        """Write ``messages`` in one write, one line each."""
        lines = [m if isinstance(m, str) else json.dumps(m) for m in messages]
        assert self.process.stdin is not None
        self.process.stdin.write("".join(line + "\n" for line in lines).encode("utf-8"))
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
                assert line, "the server closed its output"
                incoming: dict[str, Any] = json.loads(line)
                if "method" not in incoming and incoming.get("id") == rid:
                    self.raw[json.dumps(rid)] = line
                    return incoming
                self.seen.append(incoming)

    async def rest(self, timeout: float = 30) -> list[dict[str, Any]]:
        """Every line still to come, up to the end of the server's output."""
        assert self.process.stdout is not None
        found = list(self.seen)
        async with asyncio.timeout(timeout):
            while line := await self.process.stdout.readline():
                found.append(json.loads(line))
        return found


@asynccontextmanager
async def serving(argv: Sequence[str]) -> AsyncIterator[Peer]:
    """Run a stdio MCP server (``python ARGV``) for the block."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
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


def gateway_argv(folder: Path, log: Path, timeout: float = 10) -> list[str]:
    """The gateway in front of the fixture server (``tests/mcp/test_gateway.py``'s config)."""
    config = write_config(folder, log, timeout=timeout)
    return ["-m", "loopware_cli", "gateway", "--config", str(config)]


def proxy_argv(log: Path) -> list[str]:
    """The plain SDK proxy in front of the fixture server, with the gateway's names."""
    return proxy_command(fixture_command(log), prefix="fx_", name=GATEWAY_NAME)


def call(rid: object, name: object, arguments: object = None, meta: object = META) -> Message:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def request(rid: object, method: str, params: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def deep_call(rid: int, meta: object = META) -> str:
    """A ``tools/call`` line whose argument nests 1,000 arrays deep (beyond the SDK's parser)."""
    line = json.dumps(call(rid, "fx_echo", {"text": "DEEP"}, meta))
    return line.replace('"DEEP"', "[" * 1000 + '"x"' + "]" * 1000)


MODERN_OPENING: list[Message] = [
    request(1, "server/discover", {"_meta": META}),
    request(2, "tools/list", {"_meta": META}),
]
LEGACY_INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "1"},
}
DECIDED = {12, 13, 14, 15, 16, 17, 23}
"""The ids of `calls` loopware answers itself: invalid (12-14), denied (15), no such tool (16),
failed upstream (17, loopware's E_MCP_TOOL_ERROR), the third same call (23)."""


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
        call(19, "fx_echo", {"text": "no arguments next"}, meta),
        call(20, "fx_picture", None, meta),
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
    dropped unanswered)."""
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


def called(raw: dict[str, bytes]) -> dict[str, bytes]:
    """The answers to calls (ids 3 and up: 1 and 2 open every connection)."""
    return {rid: line for rid, line in raw.items() if rid not in ("1", "2")}


def listing(message: dict[str, Any]) -> bool:
    """Whether ``message`` is a ``tools/list`` request (its answer is the gateway's own)."""
    return message.get("method") == "tools/list"


def loopware_error(answer: dict[str, Any]) -> str:
    """The text of an answer loopware decided (an ``isError`` result with a typed error)."""
    result = answer["result"]
    assert result["isError"] is True, answer
    (block,) = result["content"]
    text: str = block["text"]
    assert text.startswith("Error: E_"), text
    return text


async def both(
    tmp_path: Path, sequence: Sequence[Message], timeout: float = 10
) -> tuple[dict[str, bytes], dict[str, bytes], list[Any], list[Any]]:
    """The raw answers by id of the gateway and of the SDK proxy, then their parsed answers."""
    out: list[tuple[dict[str, bytes], list[Any]]] = []
    for name in ("gateway", "proxy"):
        folder = tmp_path / name
        folder.mkdir()
        log = folder / "calls.jsonl"
        argv = gateway_argv(folder, log, timeout) if name == "gateway" else proxy_argv(log)
        async with serving(argv) as peer:
            answers = await exchange(peer, sequence)
        out.append((peer.raw, answers))
    (gateway, gateway_answers), (proxy, proxy_answers) = out
    return gateway, proxy, gateway_answers, proxy_answers


@pytest.mark.parametrize("name", list(SEQUENCES))
async def test_the_gateway_answers_every_request_as_the_sdk_proxy_does(
    name: str, tmp_path: Path
) -> None:
    gateway, proxy, answers, _ = await both(tmp_path, SEQUENCES[name])
    assert gateway.keys() == proxy.keys(), "a request answered by one server only"
    assert answers[-1] == [], "a line no request asked for"
    decided = {json.dumps(rid) for rid in DECIDED}
    lists = {json.dumps(m["id"]) for m in SEQUENCES[name] if isinstance(m, dict) and listing(m)}
    for rid, line in gateway.items():
        if rid in decided:
            loopware_error(json.loads(line))
        elif rid in lists:  # the tools the policy permits, with the schemas loopware checks
            shown = {t["name"] for t in json.loads(line)["result"]["tools"]}
            offered = {t["name"] for t in json.loads(proxy[rid])["result"]["tools"]}
            assert shown == offered - {"fx_secret"}
        else:
            assert line == proxy[rid], f"request {rid}"
    if name == "modern":
        by_id = {a["id"]: a for a in answers[:-1]}
        assert by_id[10]["result"]["content"] == [{"type": "text", "text": "hello"}]
        assert "E_TOOL_UNAVAILABLE" in loopware_error(by_id[15])
        assert "E_CALL_DENIED" in loopware_error(by_id[23])
        assert "error" in by_id[26]
        assert all("error" in by_id[n] for n in (40, 41, 42, 43))


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_deep_line_and_the_plain_call_after_it_in_one_write_are_answered_as_the_sdk_does(
    era: str, tmp_path: Path
) -> None:
    """One write holds a ``tools/call`` nested 1,000 deep (the SDK's parser refuses it, and the
    SDK leaves it unanswered) and a plain call: the plain call is forwarded and answered, the
    same bytes as the SDK proxy's answer, and the deep one gets what the SDK gives it."""
    modern = era == "modern"
    meta = META if modern else None
    opening = MODERN_OPENING if modern else SEQUENCES["legacy"][:3]
    answered: dict[str, dict[str, bytes]] = {}
    forwarded: dict[str, list[Any]] = {}
    for name in ("gateway", "proxy"):
        folder = tmp_path / name
        folder.mkdir()
        log = folder / "calls.jsonl"
        argv = gateway_argv(folder, log) if name == "gateway" else proxy_argv(log)
        async with serving(argv) as peer:
            await exchange(peer, opening)
            await peer.send(deep_call(50, meta), call(51, "fx_echo", {"text": "after"}, meta))
            await peer.answer(51)
            await peer.send(call(52, "fx_echo", {"text": "last"}, meta))  # the link still works
            await peer.answer(52)
            assert peer.process.stdin is not None
            peer.process.stdin.close()
            rest = await peer.rest()
        answered[name] = peer.raw
        forwarded[name] = [c["args"]["text"] for c in logged(log)]
        assert all(m.get("id") != 50 for m in rest), "the deep call was answered"
    assert called(answered["gateway"]) == called(answered["proxy"])
    assert called(answered["gateway"]).keys() == {"51", "52"}
    assert json.loads(answered["gateway"]["51"])["result"]["content"][0]["text"] == "after"
    assert forwarded["gateway"] == forwarded["proxy"] == ["after", "last"]


async def test_random_arguments_are_answered_as_the_sdk_proxy_does_or_refused_typed(
    tmp_path: Path,
) -> None:
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
        for key in rng.sample(["text", "times"], rng.randint(0, 2)):
            arguments[key] = rng.choice(values)
        if rng.random() < 0.5:
            arguments["text"] = f"distinct {n}"
        sequence.append(call(100 + n, "fx_echo", arguments))
    gateway, proxy, _, _ = await both(tmp_path, sequence)
    assert gateway.keys() == proxy.keys()
    same = refused = failed = 0
    for rid, line in called(gateway).items():
        if line == proxy[rid]:
            same += 1
            continue
        text = loopware_error(json.loads(line))
        if "E_INVALID_TOOL_ARGS" in text:  # what the schema refuses is refused before forwarding
            refused += 1
        else:  # the upstream failed (a JSON-RPC error): loopware's E_MCP_SERVER error call
            assert "E_MCP_SERVER" in text, rid
            assert "error" in json.loads(proxy[rid]), rid
            failed += 1
    assert same > 20
    assert refused > 5


@pytest.mark.parametrize("server", ["gateway", "proxy"])
async def test_a_cancelled_call_is_never_answered(server: str, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    argv = gateway_argv(tmp_path, log, timeout=2) if server == "gateway" else proxy_argv(log)
    async with serving(argv) as peer:
        await exchange(peer, MODERN_OPENING)
        await peer.send(call(7, "fx_hang", {}))
        await asyncio.sleep(0.3)  # the call is with the upstream
        cancel = {"requestId": 7, "reason": "the user gave up"}
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        await peer.send(call(8, "fx_echo", {"text": "next"}))
        after = await peer.answer(8)
        assert after["result"]["content"][0]["text"] == "next"
        await peer.send(call(9, "fx_echo", {"text": "last"}))
        await peer.answer(9)
        assert all(m.get("id") != 7 for m in peer.seen)


@pytest.mark.parametrize("server", ["gateway", "proxy"])
async def test_a_call_in_flight_when_the_client_hangs_up_is_answered_closed(
    server: str, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    argv = gateway_argv(tmp_path, log, timeout=30) if server == "gateway" else proxy_argv(log)
    async with serving(argv) as peer:
        await exchange(peer, MODERN_OPENING)
        await peer.send(call(7, "fx_hang", {}))
        await asyncio.sleep(0.3)
        assert peer.process.stdin is not None
        peer.process.stdin.close()
        rest = await peer.rest()
    (closed,) = [m for m in rest if m.get("id") == 7]
    assert closed["error"]["message"] == "Connection closed"


async def test_concurrent_calls_are_each_answered_once(tmp_path: Path) -> None:
    async with serving(gateway_argv(tmp_path, tmp_path / "calls.jsonl")) as peer:
        await exchange(peer, MODERN_OPENING)
        await peer.send(*(call(n + 100, "fx_echo", {"text": f"c{n}"}) for n in range(40)))
        answers = [await peer.answer(n + 100) for n in range(40)]
    assert [a["result"]["content"][0]["text"] for a in answers] == [f"c{n}" for n in range(40)]
    assert not peer.seen


async def test_a_lone_surrogate_argument_is_left_as_the_sdk_leaves_it_and_the_upstream_stays(
    tmp_path: Path,
) -> None:
    """``"\\ud800"`` in a call's arguments is a line the SDK's parser refuses: the gateway, like
    the SDK proxy, never answers it, and the next call goes to the same upstream process."""
    answered = {}
    for name in ("gateway", "proxy"):
        folder = tmp_path / name
        folder.mkdir()
        log = folder / "calls.jsonl"
        argv = gateway_argv(folder, log) if name == "gateway" else proxy_argv(log)
        async with serving(argv) as peer:
            await exchange(peer, MODERN_OPENING)
            await peer.send(call(3, "fx_echo", {"text": "before"}))
            await peer.answer(3)
            line = json.dumps(call(4, "fx_echo", {"text": "a\ud800b"}))
            assert "\\ud800" in line
            await peer.send(line, call(5, "fx_echo", {"text": "after"}))
            after = await peer.answer(5)
            assert peer.process.stdin is not None
            peer.process.stdin.close()
            rest = await peer.rest()
        assert after["result"]["content"][0]["text"] == "after"
        assert all(m.get("id") != 4 for m in rest)
        sent = logged(log)
        assert [c["args"]["text"] for c in sent] == ["before", "after"]
        assert sent[0]["pid"] == sent[1]["pid"], "the upstream was restarted"
        answered[name] = called(peer.raw)
    assert answered["gateway"] == answered["proxy"]
    assert answered["gateway"].keys() == {"3", "5"}
