"""A forwarded result reaches the client exactly as the mcp SDK delivers it: hypothesis draws
``CallToolResult`` shapes (plain text, text with annotations or its own ``_meta``, images,
``structuredContent``, a result ``_meta`` with or without the upstream's ``serverInfo``), the
fixture upstream answers with each, and the gateway's answer must be the same bytes as the plain
SDK proxy's (``bench/mcp_gateway_proxy.py``), on a 2026-07-28 connection and on a handshake one.
The servers stay up across examples, on an event loop in a thread of their own."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("mcp")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mcp.test_gateway_sdk import (
    LEGACY_INIT,
    META,
    MODERN_OPENING,
    Peer,
    call,
    exchange,
    gateway_argv,
    proxy_argv,
    request,
    serving,
)

T = TypeVar("T")
ERAS = ["modern", "legacy"]


class Live:
    """An event loop in a thread, running the servers for every example of a test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stack = AsyncExitStack()
        self.peers: dict[tuple[str, str], Peer] = {}

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def open(self, folder: Path) -> None:
        """Start a gateway and a proxy for each era, each past its opening requests."""
        for era, server in itertools.product(ERAS, ("gateway", "proxy")):
            where = folder / f"{era}-{server}"
            where.mkdir()
            log = where / "calls.jsonl"
            argv = gateway_argv(where, log) if server == "gateway" else proxy_argv(log)
            peer = await self.stack.enter_async_context(serving(argv))
            if era == "modern":
                await exchange(peer, MODERN_OPENING)
            else:
                await exchange(
                    peer,
                    [
                        request(1, "initialize", LEGACY_INIT),
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    ],
                )
            self.peers[era, server] = peer

    def close(self) -> None:
        """Stop the servers and the loop."""
        self.run(self.stack.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The gateway and the SDK proxy on both eras, up for the module's tests."""
    servers = Live()
    try:
        servers.run(servers.open(tmp_path_factory.mktemp("live")), timeout=120)
        yield servers
    finally:
        servers.close()


texts = st.text(max_size=20) | st.sampled_from(["", 'quote " and \\\\', "\u2028 é ✓"])
plain_block = texts.map(lambda t: {"type": "text", "text": t})
odd_block = st.one_of(
    texts.map(lambda t: {"type": "text", "text": t, "annotations": {"priority": 0.5}}),
    texts.map(lambda t: {"type": "text", "text": t, "_meta": {"k": t}}),
    st.just({"type": "image", "data": "AA==", "mimeType": "image/png"}),
)
metas: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({"io.modelcontextprotocol/serverInfo": {"version": "2", "name": "upstream"}}),
    st.just({}),
    st.just({"a": None, "b": {"c": None}}),
    st.dictionaries(st.sampled_from(["x", "y"]), st.integers() | st.booleans() | texts),
)
results = st.fixed_dictionaries(
    {"content": st.lists(plain_block | odd_block, max_size=3)},
    optional={
        "_meta": metas,
        "isError": st.just(False),
        "structuredContent": st.just({"n": 1}),
    },
)
nonces = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(result=results, era=st.sampled_from(ERAS))
def test_a_forwarded_result_is_the_sdk_proxys_answer_byte_for_byte(
    live: Live, result: dict[str, Any], era: str
) -> None:
    meta = META if era == "modern" else None
    rid = 1000 + next(nonces)  # every call distinct: the repetition detector lets all through
    message = call(rid, "fx_shape", {"result": result, "nonce": rid}, meta)

    async def ask(peer: Peer) -> bytes:
        await peer.send(message)
        await peer.answer(rid)
        return peer.raw.pop(json.dumps(rid))

    gateway = live.run(ask(live.peers[era, "gateway"]))
    proxy = live.run(ask(live.peers[era, "proxy"]))
    assert gateway == proxy
    assert "result" in json.loads(gateway)


def ask_both(live: Live, era: str, arguments: dict[str, Any]) -> tuple[bytes, bytes]:
    """The gateway's and the SDK proxy's answer lines to one ``fx_shape`` call."""
    meta = META if era == "modern" else None
    rid = 1000 + next(nonces)
    message = call(rid, "fx_shape", {**arguments, "nonce": rid}, meta)

    async def ask(peer: Peer) -> bytes:
        await peer.send(message)
        await peer.answer(rid)
        return peer.raw.pop(json.dumps(rid))

    return live.run(ask(live.peers[era, "gateway"])), live.run(ask(live.peers[era, "proxy"]))


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    "meta",
    [
        {"x": 0, "y": {"a": 1, "b": 2}},
        {"y": {"a": 1, "b": 2}, "x": 0},
        {"x": 0, "y": {"b": 2, "a": 1}},
        {"io.modelcontextprotocol/serverInfo": {"version": "2", "name": "upstream"}},
    ],
    ids=["meta", "meta-keys-swapped", "meta-inner-keys-swapped", "upstream-server-info"],
)
def test_a_result_meta_travels_in_its_own_key_order(
    live: Live, era: str, meta: dict[str, Any]
) -> None:
    result = {"content": [{"type": "text", "text": "hi"}], "_meta": meta}
    gateway, proxy = ask_both(live, era, {"result": result})
    assert gateway == proxy
    sent = json.loads(gateway)["result"]["_meta"]
    assert [key for key in sent if key in meta] == list(meta)


@pytest.mark.parametrize("era", ERAS)
def test_an_upstream_error_result_is_loopwares_error_in_the_sdks_wire_form(
    live: Live, era: str
) -> None:
    """A result with ``isError`` is a failed call: the gateway answers loopware's typed error,
    and its answer is what the SDK's server makes of that result (the proxy forwarding it)."""
    failed = {"content": [{"type": "text", "text": "disk on fire"}], "isError": True}
    gateway, _ = ask_both(live, era, {"result": failed})
    answer = json.loads(gateway)["result"]
    (block,) = answer["content"]
    assert block["text"].startswith("Error: E_MCP_TOOL_ERROR")
    assert "disk on fire" in block["text"]
    same = {"content": answer["content"], "isError": True}
    if "_meta" in answer:
        same["_meta"] = answer["_meta"]
    _, proxy = ask_both(live, era, {"result": same})
    forwarded = json.loads(proxy)["result"]
    if "_meta" not in answer:  # the upstream stamps its own serverInfo on what it sends
        del forwarded["_meta"]
    assert answer == forwarded
