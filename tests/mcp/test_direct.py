"""The direct ``tools/call`` link (pipeline/mcp/_direct.py) against a real SDK server and a
hand-written one: the same request and the same outcome as the SDK's client for good calls,
errors and server-side failures; a clear, prompt error for what the SDK's client chokes on;
the server told when a call is abandoned; stray lines left to the SDK."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from hypothesis import given
from hypothesis import strategies as st

from pipeline.calls import ToolCall
from pipeline.mcp import MCPToolset
from pipeline.mcp._direct import _encode
from tests.mcp.conftest import HERE, fixture_command, logged, media_of, runner, scripted, text_of

RAW = str(HERE / "raw_server.py")


def raw(mode: str, log: Path) -> list[str]:
    return [sys.executable, RAW, mode, str(log)]


def shown(call: ToolCall) -> object:
    """A record's text, or its media's kinds, types and names."""
    if isinstance(call.results, tuple):
        return [(m.kind, m.mime_type, m.filename, m.trust_tier) for m in media_of(call)]
    return text_of(call)


def received(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def outcome(command: list[str], direct: bool, calls: list[tuple[str, str]]) -> list[Any]:
    """Each call's (is_error, text) and the raw results the server sent, through a turn."""
    seen: list[Any] = []
    async with MCPToolset(
        command, timeout=2, direct=direct, on_result=lambda _, r: seen.append(r)
    ) as tools:
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
    ("echo", '{"text": 1}'),
]


async def test_against_an_sdk_server_both_links_give_the_same_results(tmp_path: Path) -> None:
    direct = await outcome(fixture_command(tmp_path / "a.jsonl"), True, FIXTURE_CALLS)
    sdk = await outcome(fixture_command(tmp_path / "b.jsonl"), False, FIXTURE_CALLS)
    assert direct == sdk
    texts = [text for _, text in direct[0]]
    assert texts[0] == "hi"
    assert isinstance(texts[3], list)
    assert len(texts[5]) == 2 * 1024 * 1024


async def test_the_direct_request_is_the_one_the_sdk_sends(tmp_path: Path) -> None:
    for direct in (True, False):
        await outcome(raw("echo", tmp_path / f"{direct}.log"), direct, [("echo", '{"text": "a"}')])
    (lean,) = [m for m in received(tmp_path / "True.log") if m.get("method") == "tools/call"]
    (sdk,) = [m for m in received(tmp_path / "False.log") if m.get("method") == "tools/call"]
    assert lean["params"] == sdk["params"]
    assert lean["jsonrpc"] == sdk["jsonrpc"] == "2.0"
    assert isinstance(lean["id"], str)
    assert lean["id"].startswith("loopware-")


async def test_an_error_answer_is_the_same_error_call_on_both_links(tmp_path: Path) -> None:
    log = tmp_path / "a.log"  # the same command line for both (it is in the error text)
    direct = await outcome(raw("error", log), True, [("echo", '{"text": "a"}')])
    sdk = await outcome(raw("error", log), False, [("echo", '{"text": "a"}')])
    assert direct == sdk
    ((is_error, text),) = direct[0]
    assert is_error
    assert "quota exceeded" in text


async def test_a_server_dying_mid_call_is_the_same_error_call_on_both_links(
    tmp_path: Path,
) -> None:
    log = tmp_path / "a.log"
    direct = await outcome(raw("die", log), True, [("echo", '{"text": "a"}')])
    sdk = await outcome(raw("die", log), False, [("echo", '{"text": "a"}')])
    assert direct == sdk
    ((is_error, text),) = direct[0]
    assert is_error
    assert "died during the call" in text


async def test_a_result_that_is_not_an_object_is_a_prompt_error_call(tmp_path: Path) -> None:
    started = time.monotonic()
    answers, _ = await outcome(raw("junk", tmp_path / "a.log"), True, [("echo", '{"text": "a"}')])
    ((is_error, text),) = answers
    assert is_error
    assert "no result object" in text
    assert time.monotonic() - started < 10


async def test_an_abandoned_call_is_cancelled_at_the_server(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    answers, _ = await outcome(raw("silent", log), True, [("echo", '{"text": "a"}')])
    ((is_error, text),) = answers
    assert is_error
    assert "E_MCP_TIMEOUT" in text
    lines = received(log)
    (sent,) = [m for m in lines if m.get("method") == "tools/call"]
    cancels = [m for m in lines if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [sent["id"]]


async def test_stray_lines_do_not_disturb_a_direct_call(tmp_path: Path) -> None:
    answers, _ = await outcome(raw("noisy", tmp_path / "a.log"), True, [("echo", '{"text": "a"}')])
    assert answers == [(False, "a")]


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sdk"])
async def test_a_lone_surrogate_argument_fails_that_call_only_and_the_link_stays(
    direct: bool, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    calls = [
        ("echo", '{"text": "before"}'),
        ("echo", '{"text": "a\\ud800b"}'),
        ("echo", '{"text": "after"}'),
    ]
    answers, _ = await outcome(fixture_command(log), direct, calls)
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


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@given(arguments=st.dictionaries(st.text(), json_values, max_size=4))
def test_a_direct_request_line_reads_back_as_what_json_dumps_writes(
    arguments: dict[str, Any],
) -> None:
    message = {"jsonrpc": "2.0", "id": "loopware-1", "method": "tools/call", "params": arguments}
    line = _encode(message)
    assert b"\n" not in line
    expected = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(line) == json.loads(expected)


def test_a_lone_surrogate_cannot_be_encoded_into_a_request() -> None:
    with pytest.raises(UnicodeEncodeError):
        _encode({"params": {"arguments": {"text": "a\ud800"}}})
