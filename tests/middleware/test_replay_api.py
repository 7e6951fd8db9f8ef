"""`middleware.transcripts.replay` and `read_transcript` as a Python API: inputs, formats, near
misses."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from middleware import ToolCallLimit, ToolPolicy
from middleware.transcripts import (
    ReplayReport,
    Transcript,
    parse_transcript,
    read_transcript,
    replay,
    replay_async,
)
from pipeline import tool as as_tool

DATA = Path(__file__).resolve().parents[1] / "data"


def chat(*calls: tuple[str, str], answer: str = "done") -> list[dict[str, Any]]:
    """One user turn making each (id, tool) call in its own step, then answering."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for cid, tool in calls:
        fn = {"name": tool, "arguments": "{}"}
        messages.append({"role": "assistant", "tool_calls": [{"id": cid, "function": fn}]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": f"{tool} ok"})
    messages.append({"role": "assistant", "content": answer})
    return messages


def test_replay_takes_a_path_data_or_a_transcript_and_agrees() -> None:
    """A path, the decoded list, a {"messages": ...} object and a Transcript give one report."""
    path = DATA / "coding_agent_loop.json"
    data = json.loads(path.read_text())
    stack = [ToolCallLimit({"run_command": 2})]
    reports = [
        replay(path, stack),
        replay(str(path), [ToolCallLimit({"run_command": 2})]),
        replay(data, [ToolCallLimit({"run_command": 2})]),
        replay({"messages": data}, [ToolCallLimit({"run_command": 2})]),
        replay(read_transcript(path), [ToolCallLimit({"run_command": 2})]),
    ]
    assert all(isinstance(r, ReplayReport) for r in reports)
    first = [c.verdict for c in reports[0].calls]
    assert first[:6] == ["allowed", "allowed", "allowed", "allowed", "denied", "denied"]
    hidden = [[(d.tool, d.action) for d in c.tool_decisions] for c in reports[0].calls]
    assert hidden[3] == [("run_command", "hidden")]  # the second run uses up the limit
    assert all([c.verdict for c in r.calls] == first for r in reports)
    assert reports[0].middleware == (repr(stack[0]),)


def test_replay_async_runs_inside_an_event_loop_and_replay_says_to_use_it() -> None:
    """In a running loop, await replay_async; replay itself refuses with a clear error."""

    async def inside() -> ReplayReport:
        with pytest.raises(RuntimeError, match="cannot be called from a running event loop"):
            replay(chat(("a", "search")))
        return await replay_async(chat(("a", "search")), [ToolPolicy(deny=["search"])])

    report = asyncio.run(inside())
    assert [c.verdict for c in report.calls] == ["denied"]
    assert report.refused


def test_read_transcript_never_raises_for_bad_data() -> None:
    """Data that is not a transcript becomes issues, not exceptions."""
    assert read_transcript({"hello": 1}).unreadable
    odd = read_transcript([1, None, "x", {"role": "user", "content": "hi"}])
    assert [i.message_index for i in odd.issues] == [0, 1, 2]
    assert len(odd.turns) == 1
    with pytest.raises(TypeError, match="parse_transcript"):
        read_transcript(b"[]")


def test_responses_api_containers_and_hosted_items() -> None:
    """A Responses request ({"instructions", "input": [...]}) is read; a hosted tool's call and
    output are noted (not replayed, not errors); a function_call with an object is accepted."""
    request = {
        "instructions": "be brief",
        "input": [
            {"role": "user", "content": "weather in Oslo, then search"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": {"c": 1}},
            {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "sun"},
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "Rain."}
            ]},
        ],
    }  # fmt: skip
    transcript = read_transcript(request)
    assert transcript.format == "openai-responses"
    assert transcript.system_prompt == "be brief"
    assert transcript.errors == ()
    assert [i.code for i in transcript.issues] == ["N_TRANSCRIPT_SKIPPED"]
    (turn,) = transcript.turns
    assert len(turn.steps) == 1  # the two function_call items are one response
    assert [(c.id, c.arguments, c.result) for c in turn.calls] == [
        ("c1", '{"c": 1}', "rain"),
        ("c2", "{}", "sun"),
    ]
    assert turn.answer == "Rain."


def test_wrapped_log_entries_and_thinking_blocks() -> None:
    """Coding-agent log lines ({"type": ..., "message": {...}}) unwrap; meta entries are notes;
    thinking blocks are kept out of the text."""
    lines = [
        {"type": "summary", "summary": "earlier work"},
        {"type": "user", "message": {"role": "user", "content": "fix it"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "let me see", "signature": "x"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Fixed."}]}},
    ]  # fmt: skip
    text = "\n".join(json.dumps(line) for line in lines)
    transcript = parse_transcript(text, jsonl=True)
    assert transcript.format == "anthropic"
    assert transcript.errors == ()
    assert [i.code for i in transcript.issues] == ["N_TRANSCRIPT_SKIPPED"]
    (turn,) = transcript.turns
    assert [(s.text, [c.tool for c in s.calls]) for s in turn.steps] == [(None, ["Bash"])]
    assert turn.answer == "Fixed."


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "human", "content": "hi"}, "did you mean 'user'?"),
        ({"role": "ai", "content": "hi"}, "did you mean 'assistant'?"),
        ({"parts": [{"text": "hi"}]}, 'Gemini "parts" are not supported'),
        ({"content": "hi"}, 'a message needs a "role" (or a Responses API "type")'),
        ({"type": "banana"}, "unknown item type 'banana'"),
        (
            {"role": "assistant", "tool_calls": [{"id": "x", "name": "f", "arguments": "{}"}]},
            'found "name" at the top level',
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x"}]},
            "a tool_result block belongs in a user message",
        ),
        ({"role": "tool", "tool_call_ids": "c1", "content": "?"}, "tool_call_ids (a non-empty"),
    ],
    ids=["human", "ai", "gemini", "no-role", "unknown-type", "flat-call", "result-in-assistant",
         "ids-not-a-list"],
)  # fmt: skip
def test_near_miss_variants_get_a_message_that_says_what_to_change(
    message: dict[str, Any], expected: str
) -> None:
    """Shapes from other conventions are named, with the fix, rather than a bare 'unknown'."""
    transcript = read_transcript([message])
    assert [i.code.startswith("E_") for i in transcript.issues] == [True]
    assert expected in transcript.issues[0].message


def test_a_second_result_for_an_answered_call_says_so() -> None:
    """A duplicate result is 'already answered', not an 'unknown' id."""
    messages = chat(("a", "search"))
    messages.insert(3, {"role": "tool", "tool_call_id": "a", "content": "again"})
    (issue,) = read_transcript(messages).issues
    assert "which was already answered" in issue.message


def test_jsonl_files_are_streamed_and_bad_bytes_name_their_line(tmp_path: Path) -> None:
    """A JSON Lines file with one undecodable line keeps every other line."""
    lines = [json.dumps(m).encode() for m in chat(("a", "search"), ("b", "fetch"))]
    lines.insert(2, b'{"role": "user", "content": "\xff"}')
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    transcript = read_transcript(path)
    (issue,) = transcript.issues
    assert (issue.code, issue.line) == ("E_TRANSCRIPT_READ", 3)
    assert [c.tool for c in transcript.calls] == ["search", "fetch"]
    assert isinstance(transcript, Transcript)


@pytest.mark.parametrize(
    "name", ["coding_agent_loop.json", "support_agent_denied.json", "research_agent.jsonl"]
)
def test_the_streamed_json_is_the_indented_json_of_as_dict(name: str) -> None:
    """`iter_json` pieces join to exactly ``json.dumps(as_dict(), indent=2)``."""
    report = replay(DATA / name, [ToolCallLimit({"issue_refund": 1, "run_command": 2})])
    text = "".join(report.iter_json())
    assert text == json.dumps(report.as_dict(), indent=2, ensure_ascii=False)
    assert text == report.to_json()
    empty = replay([])
    assert empty.to_json() == json.dumps(empty.as_dict(), indent=2)


def test_reprs_stay_short_for_large_reports() -> None:
    """A report or transcript repr summarises (asyncio reprs a finished task's result)."""
    messages = chat(*((f"c{n}", "search") for n in range(200)))
    report = replay(messages)
    assert len(repr(report)) < 200
    assert len(repr(report.transcript)) < 200
    assert "turns=1" in repr(report)


def test_replay_against_the_real_tools_checks_names_and_schemas_and_never_runs_them() -> None:
    """With ``tools=``, a recorded call to a name none of them has is an unknown tool and
    arguments failing a schema are invalid, as they were live; the others return their recorded
    results through the real tool's schema, and the real handlers never run."""
    ran: list[str] = []

    @as_tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        ran.append(order_id)
        return "live result"

    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for cid, name, args in (
        ("a", "lookup", {"order_id": "7"}),
        ("b", "lookup", {"order_id": 7}),
        ("c", "lookpu", {"order_id": "7"}),
    ):
        fn = {"name": name, "arguments": json.dumps(args)}
        messages.append({"role": "assistant", "tool_calls": [{"id": cid, "function": fn}]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": f"recorded {cid}"})
    messages.append({"role": "assistant", "content": "done"})
    report = replay(messages, tools=[lookup])
    assert [(c.verdict, c.ran, c.offered) for c in report.calls] == [
        ("allowed", True, True),
        ("invalid", False, True),
        ("invalid", False, False),
    ]
    first, second, third = report.calls
    assert first.stored is not None
    assert first.stored.results == "recorded a"
    assert (second.error or "").startswith("Error: E_INVALID_TOOL_ARGS")
    assert (third.error or "").startswith("Error: E_TOOL_NOT_FOUND: unknown tool 'lookpu'")
    assert ran == []
    # without tools=, every recorded name is a permissive stand-in: nothing is invalid
    assert [c.verdict for c in replay(messages).calls] == ["allowed"] * 3
