"""`MCPToolset`'s link to a server is the mcp SDK's own `Client` (on loopware's linear stdio
transport, pipeline/mcp/_stdio.py), so it sends and reads exactly what the SDK's client does:
the same request params for any arguments, the same results from an SDK server, the same
reading of any raw result a hand-written server sends (accepted into the same
``CallToolResult``, or refused by both), and a clear, prompt error call for errors, junk, a
dying server or one that never answers; arguments UTF-8 cannot carry fail that call only."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("mcp")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp import MCPError as McpError
from mcp_types import REQUEST_TIMEOUT

from pipeline.calls import ToolCall
from pipeline.mcp import MCPServerError, MCPToolset
from pipeline.mcp._connection import Connection
from tests.mcp.conftest import HERE, fixture_command, logged, media_of, runner, scripted, text_of

RAW = str(HERE / "raw_server.py")
T = TypeVar("T")


def raw(mode: str, log: Path) -> list[str]:
    return [sys.executable, RAW, mode, str(log)]


def sdk_client(command: list[str]) -> Client:
    """The SDK's own client, on the SDK's own stdio transport."""
    return Client(StdioServerParameters(command=command[0], args=command[1:]))


def shown(call: ToolCall) -> object:
    """A record's text, or its media's kinds, types and names."""
    if isinstance(call.results, tuple):
        return [(m.kind, m.mime_type, m.filename, m.trust_tier) for m in media_of(call)]
    return text_of(call)


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().split("\n") if line.strip()]


async def outcome(command: list[str], calls: list[tuple[str, str]]) -> list[Any]:
    """Each call's (is_error, text) and the raw results the server sent, through a turn."""
    seen: list[Any] = []
    async with MCPToolset(command, timeout=2, on_result=lambda _, r: seen.append(r)) as tools:
        batches = [[(f"c{n}", name, args)] for n, (name, args) in enumerate(calls)]
        result = await runner(scripted(*batches), tools).run("go")
    return [
        [(c.is_error, shown(c)) for c in result.tool_calls],
        [r.model_dump(by_alias=True, exclude_none=True) for r in seen],
    ]


FIXTURE_CALLS = [
    ("echo", '{"text": "hi"}'),
    ("echo", '{"text": "ünïcödé ✓", "times": 3}'),
    ("fail", "{}"),
    ("picture", "{}"),
    ("count", "{}"),
    ("big", '{"mb": 2}'),
]


async def test_the_results_of_an_sdk_server_are_the_sdk_clients(tmp_path: Path) -> None:
    answers, results = await outcome(fixture_command(tmp_path / "a.jsonl"), FIXTURE_CALLS)
    async with sdk_client(fixture_command(tmp_path / "b.jsonl")) as client:
        expected = [
            (await client.call_tool(name, json.loads(args))).model_dump(
                by_alias=True, exclude_none=True
            )
            for name, args in FIXTURE_CALLS
        ]
    assert results == expected
    texts = [text for _, text in answers]
    assert texts[0] == "hi"
    assert answers[2][0] is True
    assert isinstance(texts[3], list)
    assert len(texts[5]) == 2 * 1024 * 1024


async def test_the_request_is_the_one_the_sdk_client_sends(tmp_path: Path) -> None:
    await outcome(raw("echo", tmp_path / "toolset.log"), [("echo", '{"text": "a"}')])
    async with sdk_client(raw("echo", tmp_path / "sdk.log")) as client:
        await client.call_tool("echo", {"text": "a"})
    (ours,) = [m for m in received(tmp_path / "toolset.log") if m.get("method") == "tools/call"]
    (sdk,) = [m for m in received(tmp_path / "sdk.log") if m.get("method") == "tools/call"]
    assert ours["params"] == sdk["params"]
    assert ours["jsonrpc"] == sdk["jsonrpc"] == "2.0"


async def test_an_error_answer_is_an_error_call_with_the_servers_message(tmp_path: Path) -> None:
    answers, _ = await outcome(raw("error", tmp_path / "a.log"), [("echo", '{"text": "a"}')])
    ((is_error, text),) = answers
    assert is_error
    assert "E_MCP_SERVER" in text
    assert "quota exceeded" in text


async def test_a_server_dying_mid_call_is_an_error_call(tmp_path: Path) -> None:
    answers, _ = await outcome(raw("die", tmp_path / "a.log"), [("echo", '{"text": "a"}')])
    ((is_error, text),) = answers
    assert is_error
    assert "died during the call" in text


async def test_a_result_that_is_not_an_object_is_dropped_as_the_sdk_client_drops_it(
    tmp_path: Path,
) -> None:
    """The SDK's reader refuses a response whose result is not an object and leaves the call
    waiting: the call ends at its timeout, an error call, as with the SDK's own client."""
    started = time.monotonic()
    answers, _ = await outcome(raw("junk", tmp_path / "a.log"), [("echo", '{"text": "a"}')])
    ((is_error, text),) = answers
    assert is_error
    assert "E_MCP_TIMEOUT" in text
    assert time.monotonic() - started < 10
    async with sdk_client(raw("junk", tmp_path / "b.log")) as client:
        with pytest.raises(McpError) as refused:
            await client.call_tool("echo", {"text": "a"}, read_timeout_seconds=2)
    assert refused.value.code == REQUEST_TIMEOUT


async def test_a_call_the_server_never_answers_times_out_and_the_server_is_told(
    tmp_path: Path,
) -> None:
    log = tmp_path / "a.log"
    answers, _ = await outcome(raw("silent", log), [("echo", '{"text": "a"}')])
    ((is_error, text),) = answers
    assert is_error
    assert "E_MCP_TIMEOUT" in text
    lines = received(log)
    (sent,) = [m for m in lines if m.get("method") == "tools/call"]
    cancels = [m for m in lines if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [sent["id"]]  # the server is told


async def test_stray_lines_do_not_disturb_a_call(tmp_path: Path) -> None:
    answers, _ = await outcome(raw("noisy", tmp_path / "a.log"), [("echo", '{"text": "a"}')])
    assert answers == [(False, "a")]


async def test_a_lone_surrogate_argument_fails_that_call_only_and_the_link_stays(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.jsonl"
    calls = [
        ("echo", '{"text": "before"}'),
        ("echo", '{"text": "a\\ud800b"}'),
        ("echo", '{"text": "after"}'),
    ]
    answers, _ = await outcome(fixture_command(log), calls)
    assert answers[0] == (False, "before")
    is_error, text = answers[1]
    assert is_error
    assert text.startswith("Error: E_INVALID_TOOL_ARGS")
    assert "lone surrogate" in text
    assert "died" not in text
    assert answers[2] == (False, "after")
    sent = logged(log)
    assert [c["args"]["text"] for c in sent] == ["before", "after"]
    assert sent[0]["pid"] == sent[1]["pid"], "the server was restarted"


class Links:
    """A `Connection` and the SDK's own `Client`, each to a raw server, on a loop in a thread
    (up across hypothesis examples; the SDK client is held open by a task of its own)."""

    def __init__(self, folder: Path, mode: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.logs = (folder / f"{mode}-ours.log", folder / f"{mode}-sdk.log")
        self.ours = Connection(raw(mode, self.logs[0]), connect_timeout=30)
        self.sdk: Any = None
        self.closing: asyncio.Event | None = None
        self.holder: Future[None] = asyncio.run_coroutine_threadsafe(self._hold(mode), self.loop)
        self.run(self.ours.client())
        deadline = time.monotonic() + 30
        while self.sdk is None:
            assert time.monotonic() < deadline, "the SDK client did not connect"
            assert not self.holder.done(), self.holder.result()
            time.sleep(0.05)

    async def _hold(self, mode: str) -> None:
        self.closing = asyncio.Event()
        async with sdk_client(raw(mode, self.logs[1])) as client:
            self.sdk = client
            await self.closing.wait()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(60)

    def both(self, arguments: dict[str, Any]) -> tuple[object, object]:
        """Each link's result of one ``echo`` call as a dump, or ``"refused"``."""

        async def ours() -> object:
            try:
                result = await self.ours.call("echo", arguments, 10)
            except MCPServerError:
                return "refused"
            return result.model_dump(by_alias=True)

        async def sdk() -> object:
            try:
                result = await self.sdk.call_tool("echo", arguments, read_timeout_seconds=10)
            except Exception:  # the SDK's client raises what it cannot read
                return "refused"
            return result.model_dump(by_alias=True)

        return self.run(ours()), self.run(sdk())

    def close(self) -> None:
        self.run(self.ours.aclose())
        assert self.closing is not None
        self.loop.call_soon_threadsafe(self.closing.set)
        self.holder.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def shape_links(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Links]:
    links = Links(tmp_path_factory.mktemp("shape"), "shape")
    try:
        yield links
    finally:
        links.close()


@pytest.fixture(scope="module")
def echo_links(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Links]:
    links = Links(tmp_path_factory.mktemp("echo"), "echo")
    try:
        yield links
    finally:
        links.close()


texts = st.text(st.characters(codec="utf-8"), max_size=30)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
plain_block = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
odd_block = st.dictionaries(
    st.sampled_from(["type", "text", "annotations", "_meta", "data", "mimeType"]),
    scalars | st.just("text") | st.just("image") | st.just({"audience": ["user"]}),
    max_size=4,
)
blocks = st.lists(plain_block | odd_block, max_size=4)
metas = st.dictionaries(st.text(max_size=5), scalars, max_size=3)
raw_results = st.one_of(
    st.fixed_dictionaries(
        {"content": st.lists(plain_block, max_size=4)},
        optional={
            "isError": st.booleans(),
            "_meta": metas,
            "resultType": st.sampled_from(["complete", "input_required"]),
        },
    ),
    st.dictionaries(
        st.sampled_from(
            ["content", "isError", "_meta", "structuredContent", "resultType", "ttlMs", "x"]
        ),
        blocks | scalars | metas | st.just("complete") | st.just("input_required"),
        max_size=4,
    ),
)
nonces = itertools.count()


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(result=raw_results)
def test_any_raw_result_is_read_as_the_sdk_client_reads_it(
    shape_links: Links, result: dict[str, Any]
) -> None:
    ours, sdk = shape_links.both({"text": f"n{next(nonces)}", "result": result})
    assert ours == sdk


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=texts, others=st.dictionaries(texts.filter(lambda k: k != "text"), json_values))
def test_any_arguments_are_sent_as_the_sdk_client_sends_them(
    echo_links: Links, text: str, others: dict[str, Any]
) -> None:
    arguments = {**others, "text": text}
    ours, sdk = echo_links.both(arguments)
    assert ours == sdk != "refused"
    sent = [
        [m["params"] for m in received(log) if m.get("method") == "tools/call"][-1]
        for log in echo_links.logs
    ]
    assert sent[0] == sent[1]
    assert sent[0]["arguments"] == arguments
