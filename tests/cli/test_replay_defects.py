"""`loopware replay`: each defect found in the command, shown on a small transcript (one test
each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopware_cli._main import main

REPO = Path(__file__).resolve().parents[2]
STACKS = "tests.data.replay_stacks"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root, so ``tests.data.replay_stacks`` is importable."""
    monkeypatch.chdir(REPO)


def write(tmp_path: Path, messages: object, name: str = "t.json") -> str:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        assert isinstance(messages, list)
        path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    else:
        path.write_text(json.dumps(messages))
    return str(path)


def call(cid: str, name: str, args: object = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def step(*calls: dict[str, Any], results: str = "ok") -> list[dict[str, Any]]:
    """One assistant message proposing ``calls`` and a tool message answering each."""
    return [
        {"role": "assistant", "content": None, "tool_calls": list(calls)},
        *({"role": "tool", "tool_call_id": c["id"], "content": results} for c in calls),
    ]


def replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    status = main(["replay", *args, "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["tool"], c["verdict"]) for t in report["turns"] for c in t["calls"]]


def test_an_approval_rejection_is_reported_rejected_even_when_call_ids_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Providers reuse ids across turns (``call_0`` each time): the gate's rejection of the
    second turn's refund is still that call's verdict, it never ran, and the exit status is 1."""
    messages: list[dict[str, Any]] = []
    for turn, tool in enumerate(("lookup_order", "issue_refund")):
        messages.append({"role": "user", "content": f"question {turn}"})
        messages += step(call("call_0", tool))
        messages.append({"role": "assistant", "content": "done"})
    status, report, _ = replay_json(
        capsys, write(tmp_path, messages), "-m", f"{STACKS}:rejecting_approval"
    )
    assert verdicts(report) == [("lookup_order", "allowed"), ("issue_refund", "rejected")]
    refund = report["turns"][1]["calls"][0]
    assert refund["ran"] is False
    assert [d["action"] for d in refund["decisions"]] == ["rejected"]
    assert report["turns"][1]["decisions"] == []
    assert status == 1


def test_a_turn_ended_mid_way_is_shown_ending_where_it_happened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An iteration budget spent at iteration 2 ends the turn after the last call that ran: the
    turn's end is printed there, before the calls it never reached, not after them."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "dig"}]
    for n in range(4):
        messages += step(call(f"c{n}", "search", json.dumps({"q": n})))
    messages.append({"role": "assistant", "content": "done"})
    status = main(["replay", write(tmp_path, messages), "-m", f"{STACKS}:two_iterations"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    assert not any("before the model" in line for line in lines)
    budget = next(i for i, line in enumerate(lines) if "iteration budget of 2 spent" in line)
    second = next(i for i, line in enumerate(lines) if line.startswith("  #1 "))
    third = next(i for i, line in enumerate(lines) if line.startswith("  #2 "))
    assert second < budget < third
    assert lines[budget].startswith("  turn 0 failed after ")
    assert "E_POLICY_VIOLATION" in lines[budget]
    assert lines[third].startswith("  #2   not reached search")


def test_a_tool_hidden_mid_turn_is_shown_under_the_call_that_hid_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The search that uses up its limit runs (allowed) and the tool it hid is listed under
    it, not under the turn; the next search is denied, and says the tool was hidden."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "dig"}]
    for n in range(2):
        messages += step(call(f"c{n}", "search", json.dumps({"q": n})))
    messages.append({"role": "assistant", "content": "done"})
    status = main(["replay", write(tmp_path, messages), "--limit", "search=1"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    first = next(i for i, line in enumerate(lines) if line.startswith("  #0   allowed     search"))
    assert lines[first + 1] == (
        " " * 19 + "then: tool search hidden - limit reached: its limit of 1 run per turn is "
        "used up [loopware.limit]"
    )
    assert lines[first + 2].startswith("  #1   denied      search")
    assert (
        " " * 19 + "denied - limit reached: the tool was hidden: its limit of 1 run per turn is "
        "used up [loopware.limit]"
    ) in lines[first + 3 :]


def test_replay_memory_grows_linearly_with_calls_per_turn(tmp_path: Path) -> None:
    """Doubling the calls of one turn about doubles the replay's peak memory (the scripted
    model kept every request, each holding the whole history: four times as much)."""
    import asyncio
    import tracemalloc

    from middleware.transcripts import read_transcript, replay_async

    def peak(n: int) -> int:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "loop"}]
        for k in range(n):
            messages += step(call(f"c{k}", "search", json.dumps({"q": k})))
        messages.append({"role": "assistant", "content": "done"})
        transcript = read_transcript(messages)
        tracemalloc.start()
        try:
            asyncio.run(replay_async(transcript))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(800), peak(1600)
    assert large / small < 2.6, (small, large)


def test_unregistrable_tool_names_are_replayed_under_a_safe_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``Final Answer`` and ``functions.now:0`` cannot be loopware tool names: they run under an
    alias, are offered, and the report says so instead of "allowed" plus "not offered"."""
    messages = [
        {"role": "user", "content": "what time is it?"},
        *step(call("a", "functions.now:0"), call("b", "Final Answer", '{"answer": "noon"}')),
        {"role": "assistant", "content": "noon"},
    ]
    status, report, _ = replay_json(capsys, write(tmp_path, messages))
    calls = report["turns"][0]["calls"]
    assert status == 0
    assert [(c["tool"], c["alias"], c["offered"], c["ran"]) for c in calls] == [
        ("functions.now:0", "functions_now_0", True, True),
        ("Final Answer", "Final_Answer", True, True),
    ]
    main(["replay", write(tmp_path, messages)])
    out = capsys.readouterr().out
    assert "not offered" not in out
    assert "replayed as Final_Answer" in out


def test_consecutive_one_block_assistant_entries_are_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Coding-agent exports store one content block per entry: text, tool_use, tool_use and
    their results are one model step of one turn, so a per-turn limit still sees both calls."""
    messages = [
        {"role": "user", "content": "find it"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Searching twice."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {"q": 1}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t2", "name": "search", "input": {"q": 2}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Found."}]},
    ]
    status, report, _ = replay_json(
        capsys, write(tmp_path, messages, "t.jsonl"), "-m", f"{STACKS}:per_turn_refund_limit"
    )
    assert len(report["turns"]) == 1
    assert report["issues"] == []
    assert verdicts(report) == [("search", "allowed"), ("search", "denied")]
    assert status == 1


def test_a_missing_file_prints_an_error_and_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No empty report claiming a format: one error line on stderr, status 3."""
    status = main(["replay", str(tmp_path / "nope.json")])
    captured = capsys.readouterr()
    assert status == 3
    assert captured.out == ""
    assert "cannot read" in captured.err
    assert "openai" not in captured.err


def test_duplicate_call_ids_in_one_message_are_two_calls_with_their_own_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two calls sharing an id in one message are paired with their results in order, not
    reported as an unknown call id."""
    messages = [
        {"role": "user", "content": "two"},
        {
            "role": "assistant",
            "tool_calls": [call("x", "search", '{"q": 1}'), call("x", "search", '{"q": 2}')],
        },
        {"role": "tool", "tool_call_id": "x", "content": "first"},
        {"role": "tool", "tool_call_id": "x", "content": "second"},
        {"role": "assistant", "content": "done"},
    ]
    status, report, err = replay_json(capsys, write(tmp_path, messages))
    assert status == 0
    assert "unknown call id" not in err
    assert report["issues"] == []
    assert [c["result"] for c in report["turns"][0]["calls"]] == ["first", "second"]


def test_openai_responses_items_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Responses API items (message, function_call, function_call_output, reasoning) replay."""
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "fc1", "name": "search", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "fc1", "output": "found"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
    ]
    status, report, err = replay_json(capsys, write(tmp_path, items, "t.jsonl"))
    assert (status, err) == (0, "")
    assert report["format"] == "openai-responses"
    assert verdicts(report) == [("search", "allowed")]
    assert report["turns"][0]["calls"][0]["result"] == "found"


def test_tool_messages_listing_tool_call_ids_are_paired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trajectories that answer with ``tool_call_ids: [id]`` are understood."""
    messages = [
        {"role": "user", "content": "fix"},
        {"role": "assistant", "tool_calls": [call("c1", "bash", '{"cmd": "ls"}')]},
        {"role": "tool", "tool_call_ids": ["c1"], "content": "README.md"},
        {"role": "assistant", "content": "done"},
    ]
    status, report, err = replay_json(capsys, write(tmp_path, messages))
    assert (status, err) == (0, "")
    assert report["turns"][0]["calls"][0]["result"] == "README.md"


def test_the_oscillation_message_says_what_distinguishes_the_two_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """read_file a.py / b.py / a.py / b.py: the reason shows the two paths, not two hashes."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read"}]
    for n, path in enumerate(("a.py", "b.py", "a.py", "b.py")):
        messages += step(call(f"r{n}", "read_file", json.dumps({"path": path})))
    messages.append({"role": "assistant", "content": "done"})
    main(["replay", write(tmp_path, messages), "-m", f"{STACKS}:oscillation"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "oscillating" in line and "[loop" in line)
    assert '"path": "a.py"' in line
    assert '"path": "b.py"' in line


def test_replay_without_a_policy_says_so_and_suggests_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No -m and no policy flag: the report says no policy is used and how to set one."""
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    main(["replay", write(tmp_path, messages)])
    out = capsys.readouterr().out
    assert "no policy" in out
    assert "--deny" in out


def test_invalid_argument_json_is_a_model_error_with_its_own_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad argument JSON is what the model sent, not an unreadable file: status 6, the call
    is replayed as sent and is invalid, as it was live."""
    messages = [
        {"role": "user", "content": "x"},
        *step(call("c1", "search", '{"q": ')),
        {"role": "assistant", "content": "y"},
    ]
    status, report, err = replay_json(capsys, write(tmp_path, messages))
    assert status == 6
    assert "E_TRANSCRIPT_ARGS" in err
    assert verdicts(report) == [("search", "invalid")]
    assert report["turns"][0]["calls"][0]["ran"] is False
