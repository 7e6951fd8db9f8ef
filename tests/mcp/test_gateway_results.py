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
