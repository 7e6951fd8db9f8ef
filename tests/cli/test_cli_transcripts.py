"""Reading transcripts for `loopware replay`: formats, and bad input reported with positions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopware_cli._main import main
from middleware.transcripts import parse_transcript, read_transcript

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def call(cid: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


TRUNCATED = """[
  {"role": "user", "content": "find it"},
  {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
  {"role": "tool", "tool_call_id": "c1", "content": "found"},
  {"role": "assistant", "content": "It is in the drawe"""  # noqa: E501


def test_truncated_json_names_line_and_column_and_keeps_the_good_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file cut mid-message: the error points at the cut, the messages before it replay."""
    path = tmp_path / "cut.json"
    path.write_text(TRUNCATED)
    status = main(["replay", str(path), "--json"])
    captured = capsys.readouterr()
    assert status == 3
    assert captured.err.splitlines() == [
        f"{path}:5:36: E_TRANSCRIPT_JSON: messages[3]: invalid JSON: Unterminated string "
        "starting at: line 5 column 36 (the file ends before the array of messages is "
        "closed: truncated?)"
    ]
    report = json.loads(captured.out)
    assert report["issues"] == [
        {
            "code": "E_TRANSCRIPT_JSON",
            "message": "invalid JSON: Unterminated string starting at: line 5 column 36 (the "
            "file ends before the array of messages is closed: truncated?)",
            "message_index": 3,
            "line": 5,
            "column": 36,
        }
    ]
    assert [(c["tool"], c["verdict"]) for c in report["turns"][0]["calls"]] == [
        ("search", "allowed")
    ]
    assert report["turns"][0]["answered"] is False


def test_a_truncated_sample_still_reports_every_complete_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cutting a real transcript in half keeps every call recorded before the cut."""
    text = (DATA / "coding_agent_loop.json").read_text()
    cut = text.index('"call_Qm5"')
    path = tmp_path / "half.json"
    path.write_text(text[:cut])
    status = main(["replay", str(path), "-m", "middleware:RepetitionDetector", "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert status == 3
    assert [c["id"] for c in report["turns"][0]["calls"]] == [f"call_Qm{n}" for n in (1, 2, 3, 4)]
    line = text[:cut].count("\n") + 1
    assert captured.err.startswith(f"{path}:{line}:")
    assert "E_TRANSCRIPT_JSON: messages[10]: invalid JSON:" in captured.err


def test_non_json_tool_arguments_name_the_message_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Broken arguments are the model's errors: reported with their message and line, replayed
    as sent (they are invalid), exit status 6."""
    messages = [
        {"role": "user", "content": "look up two things"},
        {"role": "assistant", "tool_calls": [call("c1", "search", '{"q": "a"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "assistant", "tool_calls": [call("c2", "search", '{"q": "b"')]},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {"role": "assistant", "tool_calls": [call("c3", "search", "[1, 2]")]},
        {"role": "tool", "tool_call_id": "c3", "content": "C"},
        {"role": "assistant", "content": "done"},
    ]
    path = tmp_path / "args.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n")
    status = main(["replay", str(path), "--json"])
    captured = capsys.readouterr()
    assert status == 6
    assert captured.err.splitlines() == [
        f"{path}:4: E_TRANSCRIPT_ARGS: messages[3]: tool_calls[0] (search): arguments are not "
        """valid JSON (Expecting ',' delimiter at character 9 of '{"q": "b"')""",
        f"{path}:6: E_TRANSCRIPT_ARGS: messages[5]: tool_calls[0] (search): arguments must be a "
        "JSON object, not an array",
    ]
    calls = json.loads(captured.out)["turns"][0]["calls"]
    assert [c["id"] for c in calls] == ["c1", "c2", "c3"]
    assert calls[0]["error"] is None
    invalid = "Error: E_INVALID_TOOL_ARGS: the arguments for 'search'"
    assert calls[1]["error"].startswith(f"{invalid} are not valid JSON")
    assert calls[2]["error"].startswith(f"{invalid} must be a JSON object")
    assert [(c["verdict"], c["ran"]) for c in calls] == [
        ("allowed", True),
        ("invalid", False),
        ("invalid", False),
    ]


def test_a_bad_jsonl_line_is_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One unreadable JSON Lines line is reported with line and column; the others are read."""
    lines = (DATA / "research_agent.jsonl").read_text().splitlines()
    lines[13] = lines[13][:25]  # the final answer, cut
    path = tmp_path / "research.jsonl"
    path.write_text("\n".join(lines) + "\n")
    status = main(["replay", str(path), "--json"])
    captured = capsys.readouterr()
    assert status == 3
    assert captured.err.startswith(f"{path}:14:")
    assert "E_TRANSCRIPT_JSON: messages[13]: invalid JSON: Unterminated string" in captured.err
    assert json.loads(captured.out)["summary"] == {"calls": 6, "verdicts": {"allowed": 6}}


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (None, "cannot read"),
        (b"\xff\xfe[", "not UTF-8 text"),
        (b"", "the transcript is empty"),
        (b'{"hello": "world"}', 'expected a JSON array of messages, an object with a "messages"'),
        (b'[{"role": "user", "content": "x"}] trailing', "extra data after the transcript"),
        (b"[" * 100_000, "nested too deeply"),
    ],
    ids=["missing", "not-utf8", "empty", "not-a-transcript", "trailing-data", "too-deep"],
)
def test_unusable_files_exit_3(
    write: bytes | None, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Unreadable, undecodable, empty or foreign files are input errors (status 3)."""
    path = tmp_path / "t.json"
    if write is not None:
        path.write_bytes(write)
    status = main(["replay", str(path)])
    err = capsys.readouterr().err
    assert status == 3
    assert expected in err
    assert err.startswith(str(path))


def test_malformed_messages_are_reported_and_skipped() -> None:
    """Each bad message names its index; the good messages around it still make turns."""
    messages: list[Any] = [
        "not a message",
        {"role": "user", "content": "hi"},
        {"role": "wizard", "content": "?"},
        {"role": "assistant", "tool_calls": {"not": "a list"}},
        {"role": "assistant", "tool_calls": [{"id": "x", "type": "function", "function": {}}]},
        {"role": "assistant", "tool_calls": [call("ok", "search", "{}")]},
        {"role": "tool", "tool_call_id": "nobody", "content": "?"},
        {"role": "tool", "content": "no id"},
        {"role": "assistant", "function_call": {"name": "old", "arguments": "{}"}},
        {"role": "tool", "tool_call_id": "ok", "content": "found"},
        {"role": "assistant", "content": "bye"},
    ]
    transcript = parse_transcript(json.dumps(messages, indent=1))
    assert [(i.code, i.message_index) for i in transcript.issues] == [
        ("E_TRANSCRIPT_MESSAGE", 0),
        ("E_TRANSCRIPT_MESSAGE", 2),
        ("E_TRANSCRIPT_MESSAGE", 3),
        ("E_TRANSCRIPT_MESSAGE", 4),
        ("E_TRANSCRIPT_RESULT", 6),
        ("E_TRANSCRIPT_RESULT", 7),
        ("E_TRANSCRIPT_MESSAGE", 8),
    ]
    assert all(issue.line is not None for issue in transcript.issues)
    (turn,) = transcript.turns
    assert [(c.id, c.tool, c.result) for c in turn.calls] == [("ok", "search", "found")]
    assert turn.answer == "bye"


def test_a_truncated_anthropic_object_keeps_its_system_prompt_and_good_messages() -> None:
    """The ``{"system", "messages"}`` object is walked like an array: lines known, cut kept."""
    text = (DATA / "support_agent_denied.json").read_text()
    cut = text.index('"toolu_04"')
    transcript = parse_transcript(text[:cut])
    assert transcript.system_prompt is not None
    assert [c.id for c in transcript.calls] == ["toolu_01", "toolu_02", "toolu_03"]
    lines = text.splitlines()
    for recorded in transcript.calls:  # each call's line is where its message starts
        assert recorded.line is not None
        assert lines[recorded.line - 1].strip() == "{"
        assert lines[recorded.line].strip() == '"role": "assistant",'
    (issue,) = transcript.issues
    assert (issue.code, issue.message_index) == ("E_TRANSCRIPT_JSON", 7)
    assert "truncated?" in issue.message
    assert issue.line is not None
    assert issue.line <= text[:cut].count("\n") + 1


def test_formats_and_containers_are_detected() -> None:
    """Anthropic objects keep their system prompt; JSON Lines is recognised without a suffix."""
    support = read_transcript(DATA / "support_agent_denied.json")
    assert support.format == "anthropic"
    assert support.system_prompt is not None
    assert support.system_prompt.startswith("You are the support assistant")
    assert [len(t.calls) for t in support.turns] == [6, 1]
    text = (DATA / "research_agent.jsonl").read_text()
    research = parse_transcript(text)  # no suffix to go by
    assert (research.format, research.issues, len(research.calls)) == ("openai", (), 6)
    assert research.system_prompt is not None


def test_turns_start_at_user_messages_and_after_a_final_answer() -> None:
    """An assistant that speaks first opens a continuation turn; consecutive assistant messages
    are one message (the text "Rain." goes with the umbrella call, in the same turn)."""
    messages = [
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "tool_calls": [call("w", "weather", '{"city": "Oslo"}')]},
        {"role": "tool", "tool_call_id": "w", "content": "rain"},
        {"role": "assistant", "content": "Rain."},
        {"role": "assistant", "tool_calls": [call("u", "umbrella", "")]},
        {"role": "tool", "tool_call_id": "u", "content": [{"type": "text", "text": "ok"}]},
    ]
    turns = parse_transcript(json.dumps(messages)).turns
    assert [(t.input, t.message_index, t.answer) for t in turns] == [
        ("", None, "Hello, how can I help?"),
        ("weather?", 1, None),
    ]
    assert [step.text for step in turns[1].steps] == [None, "Rain."]
    assert [(c.tool, c.arguments, c.result) for c in turns[1].calls] == [
        ("weather", '{"city": "Oslo"}', "rain"),
        ("umbrella", "", "ok"),
    ]


def test_arguments_nested_too_deeply_are_an_issue_not_a_crash() -> None:
    """Arguments too deep for the JSON decoder are reported like any other bad arguments."""
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [call("d", "deep", "[" * 100_000)]},
    ]
    transcript = parse_transcript(json.dumps(messages))
    assert [(i.code, i.message_index, i.message) for i in transcript.issues] == [
        ("E_TRANSCRIPT_ARGS", 1, "tool_calls[0] (deep): arguments are nested too deeply to read")
    ]
    assert [c.args_valid for c in transcript.calls] == [False]
