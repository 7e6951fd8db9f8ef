"""`loopware replay`: exact decisions on the sample transcripts, targets, output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopware_cli._main import main

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
STACKS = "tests.data.replay_stacks"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root, so ``tests.data.replay_stacks`` is importable."""
    monkeypatch.chdir(REPO)


def replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    status = main(["replay", *args, "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def decisions(call: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["policy"], d["action"]) for d in call["decisions"]]


def hid(call: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(d["tool"], d["action"], d["policy"]) for d in call["tool_decisions"]]


def summary(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["index"], c["tool"], c["verdict"], c["offered"], decisions(c))
        for turn in report["turns"]
        for c in turn["calls"]
    ]


REP = "loopware.repetition"
REPEATED = "the same call was made 3 times (threshold 3)"


def test_coding_agent_loop_hides_the_repeated_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The third identical pytest run runs and hides run_command; the later repeats are denied
    by the hiding policy, never run, and say why."""
    status, report, err = replay_json(
        capsys, str(DATA / "coding_agent_loop.json"), "--middleware", f"{STACKS}:coding_stack"
    )
    assert (status, err) == (1, "")  # the recorded calls to the hidden tool would be refused
    assert report["format"] == "openai"
    assert report["labels"] == {REP: "repeat detected"}
    assert summary(report) == [
        (0, "read_file", "allowed", True, []),
        (1, "run_command", "allowed", True, []),
        (2, "edit_file", "allowed", True, []),
        (3, "run_command", "allowed", True, []),
        (4, "run_command", "allowed", True, []),
        (5, "run_command", "denied", False, [(REP, "denied")]),
        (6, "run_command", "denied", False, [(REP, "denied")]),
        (7, "run_command", "allowed", True, []),  # the next turn offers the tool again
    ]
    calls = report["turns"][0]["calls"]
    assert [c["ran"] for c in calls] == [True, True, True, True, True, False, False]
    assert [hid(c) for c in calls] == [[], [], [], [], [("run_command", "hidden", REP)], [], []]
    assert calls[4]["tool_decisions"][0]["reason"] == REPEATED
    assert calls[5]["decisions"][0]["reason"] == f"the tool was hidden: {REPEATED}"
    assert calls[5]["error"].startswith("Error: E_TOOL_UNAVAILABLE: tool 'run_command' is no")
    assert [t["status"] for t in report["turns"]] == ["completed", "completed"]
    assert report["summary"] == {"calls": 8, "verdicts": {"allowed": 6, "denied": 2}}


def test_support_agent_denied_shell_and_duplicate_refund(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shell call is denied, the second refund ends the turn, the email is never reached."""
    status, report, _ = replay_json(
        capsys, str(DATA / "support_agent_denied.json"), "-m", f"{STACKS}:support_stack"
    )
    assert status == 1
    assert report["format"] == "anthropic"
    policy = ("loopware.policy", "denied")
    assert summary(report) == [
        (0, "lookup_order", "allowed", True, []),
        (1, "search_kb", "allowed", True, []),
        (2, "shell_exec", "denied", False, [policy]),
        (3, "issue_refund", "allowed", True, []),
        (4, "issue_refund", "denied", True, [("loopware.limit", "denied")]),
        (5, "send_email", "not reached", None, []),
        (6, "update_address", "allowed", True, []),
    ]
    first, second = report["turns"]
    assert (first["status"], first["error_code"]) == ("failed", "E_POLICY_VIOLATION")
    assert first["calls"][2]["error"].startswith("Error: E_TOOL_UNAVAILABLE: tool 'shell_exec'")
    assert [c["ran"] for c in first["calls"]] == [True, True, False, True, False, None]
    limit = "the limit of 1 run of 'issue_refund' per turn is used up"
    assert first["calls"][4]["decisions"][0]["reason"] == limit
    assert first["after_call"] == 4  # the nack ended the turn after the second refund
    # shell_exec is withdrawn before the model runs, in every turn
    for turn in (first, second):
        assert [(d["tool"], d["action"], d["after_call"]) for d in turn["decisions"]] == [
            ("shell_exec", "withdrawn", None)
        ]
    assert second["status"] == "completed"
    assert report["refused"] is True


def test_research_agent_stays_within_limits(capsys: pytest.CaptureFixture[str]) -> None:
    """Six distinct calls under generous limits: everything allowed, status 0."""
    status, report, err = replay_json(
        capsys, str(DATA / "research_agent.jsonl"), "-m", f"{STACKS}:research_stack"
    )
    assert (status, err) == (0, "")
    assert summary(report) == [
        (0, "web_search", "allowed", True, []),
        (1, "fetch_url", "allowed", True, []),
        (2, "fetch_url", "allowed", True, []),
        (3, "web_search", "allowed", True, []),
        (4, "fetch_url", "allowed", True, []),
        (5, "web_search", "allowed", True, []),
    ]
    assert report["pipelines"]["dispatch_output"] == ["ToolCallLimit.tally"]
    assert [c["message_index"] for c in report["turns"][0]["calls"]] == [2, 4, 4, 7, 9, 11]
    assert [c["line"] for c in report["turns"][0]["calls"]] == [3, 5, 5, 8, 10, 12]


def test_text_report_lists_each_call_with_its_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """The human report shows the verdict, tool, arguments, decisions and the turn's end."""
    status = main(
        ["replay", str(DATA / "support_agent_denied.json"), "-m", f"{STACKS}:support_stack"]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "\x1b[" not in out  # captured output is not a terminal: no colour
    lines = out.splitlines()
    assert any(
        line.startswith("  #2   denied      shell_exec {") and line.endswith("messages[5]")
        for line in lines
    )
    indent = " " * 19
    assert f"{indent}the tool was not offered to the model on this step" in lines
    assert (
        f"{indent}denied - limit reached: the limit of 1 run of 'issue_refund' per turn is used "
        "up [loopware.limit]"
    ) in lines
    assert (
        "  before the model: tool shell_exec withdrawn - tool policy: matches deny pattern "
        "'shell*' [loopware.policy]"
    ) in lines
    end = lines.index(
        "  turn 0 failed after 5 iteration(s): E_POLICY_VIOLATION: loopware.limit: issue_refund: "
        "the limit of 1 run of 'issue_refund' per turn is used up"
    )
    not_reached = next(i for i, line in enumerate(lines) if line.startswith("  #5   not reached"))
    refund = next(i for i, line in enumerate(lines) if line.startswith("  #4   denied      "))
    assert refund < end < not_reached  # the turn ends where it ended: after #4, before #5
    assert lines[-1] == "summary: 7 tool call(s): 4 allowed, 2 denied, 1 not reached"


def test_a_custom_sets_decisions_are_read_from_the_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Middleware set's own ``ctx.warn`` is on the call's record, so replay reports it as
    the built-ins' decisions are: the verdict and the decision itself."""
    status, report, _ = replay_json(
        capsys, str(DATA / "support_agent_denied.json"), "-m", f"{STACKS}:shell_watch"
    )
    assert status == 0  # warned is not a refusal
    verdicts = [c["verdict"] for c in report["turns"][0]["calls"]]
    assert verdicts == ["allowed", "allowed", "warned", "allowed", "allowed", "allowed"]
    assert report["turns"][0]["calls"][2]["decisions"] == [
        {
            "policy": "watch.shell",
            "action": "warned",
            "reason": "shell access from a support agent",
            "when": "before",
        }
    ]
    assert report["turns"][0]["calls"][2]["ran"] is True


def test_several_middleware_options_compose_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    """A class (called with its defaults) and a factory's list combine, outermost first."""
    status, report, _ = replay_json(
        capsys,
        str(DATA / "coding_agent_loop.json"),
        "-m",
        "middleware:RepetitionDetector",
        "-m",
        f"{STACKS}:support_stack",
    )
    assert status == 1  # the default RepetitionDetector blocks repeats before they run
    assert report["middleware"] == ["middleware:RepetitionDetector", f"{STACKS}:support_stack"]
    assert report["pipelines"]["tool_call"] == [
        "ToolPolicy.deny_call",
        "ToolCallLimit.reserve",
        "RepetitionDetector.watch",
    ]
    assert report["pipelines"]["dispatch_output"] == [
        "ToolPolicy.enforce",
        "ToolCallLimit.tally",
    ]
    calls = report["turns"][0]["calls"]
    assert [c["verdict"] for c in calls][4:] == ["denied"] * 3
    assert [c["ran"] for c in calls][4:] == [False] * 3


def test_turns_share_one_conversation_unless_separate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repeat counts carry over between turns; --separate-turns starts each turn fresh."""
    search = {"id": "", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    messages: list[dict[str, Any]] = []
    for turn in range(2):
        messages.append({"role": "user", "content": f"question {turn}"})
        for k in range(2):
            cid = f"c{turn}{k}"
            messages.append({"role": "assistant", "tool_calls": [{**search, "id": cid}]})
            messages.append({"role": "tool", "tool_call_id": cid, "content": "nothing"})
        messages.append({"role": "assistant", "content": "no luck"})
    path = tmp_path / "two_turns.json"
    path.write_text(json.dumps(messages))
    _, shared, _ = replay_json(capsys, str(path), "-m", f"{STACKS}:coding_stack")
    _, separate, _ = replay_json(
        capsys, str(path), "-m", f"{STACKS}:coding_stack", "--separate-turns"
    )
    # shared: the 3rd search runs and hides the tool; the 4th would be refused, never run
    assert [c[2] for c in summary(shared)] == ["allowed", "allowed", "allowed", "denied"]
    calls = [c for t in shared["turns"] for c in t["calls"]]
    assert [len(c["tool_decisions"]) for c in calls] == [0, 0, 1, 0]
    assert [c[2] for c in summary(separate)] == ["allowed"] * 4


def test_recorded_results_are_returned_to_the_matching_parallel_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two calls proposed together each get their own recorded result, and a recorded error
    result (Anthropic is_error) makes the replayed call fail: it ran, it was allowed."""
    messages = [
        {"role": "user", "content": "compare"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "fetch", "input": {"u": 1}},
                {"type": "tool_use", "id": "b", "name": "fetch", "input": {"u": 2}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "b", "content": "page two"},
                {"type": "tool_result", "tool_use_id": "a", "content": "404", "is_error": True},
            ],
        },
        {"role": "assistant", "content": "page one is gone"},
    ]
    path = tmp_path / "parallel.json"
    path.write_text(json.dumps(messages))
    status, report, _ = replay_json(capsys, str(path))
    calls = report["turns"][0]["calls"]
    assert status == 0
    assert [(c["id"], c["error"], c["verdict"], c["ran"]) for c in calls] == [
        ("a", "Error: E_TOOL_DOWNSTREAM_ERROR: 404", "allowed", True),
        ("b", None, "allowed", True),
    ]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "is not of the form module:attr"),
        ("no_such_module_for_loopware:x", "cannot import module 'no_such_module_for_loopware'"),
        (f"{STACKS}:missing", "has no attribute 'missing'"),
        (f"{STACKS}:NOT_MIDDLEWARE", "is int 42, not middleware"),
        (f"{STACKS}:support_runner", "returned TurnRunner"),
        (f"{STACKS}:needs_arguments", "cannot be called without arguments"),
        (f"{STACKS}:broken_factory", "raised RuntimeError: the policy service is down"),
        ("middleware:ToolCallLimit", "give per-tool limits"),
        ("middleware:Middleware", "cannot be called without arguments"),
    ],
    ids=[
        "syntax",
        "import",
        "attribute",
        "not-middleware",
        "wrong-type",
        "needs-args",
        "raises",
        "bad-defaults",
        "class-needs-args",
    ],
)
def test_bad_middleware_targets_exit_4(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every way a --middleware target can be wrong exits 4 with an error naming it."""
    status = main(["replay", str(DATA / "research_agent.jsonl"), "-m", target])
    captured = capsys.readouterr()
    assert status == 4
    assert captured.out == ""
    assert captured.err.startswith("loopware replay: error: E_INVALID_MIDDLEWARE_CONFIG: ")
    assert message in captured.err


def test_replay_without_middleware_allows_everything(capsys: pytest.CaptureFixture[str]) -> None:
    """With no stack there is nobody to object: every recorded call is allowed."""
    status, report, _ = replay_json(capsys, str(DATA / "coding_agent_loop.json"))
    assert status == 0
    assert report["summary"]["verdicts"] == {"allowed": 8}


@pytest.mark.parametrize(
    ("stack", "verdict", "ran"),
    [("warned_then_approved", "approved", True), ("warned_then_rejected", "rejected", False)],
    ids=["approved", "rejected"],
)
def test_a_calls_verdict_is_its_records_whatever_several_policies_decided(
    stack: str, verdict: str, ran: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repeated shell call is warned about, then approved (or rejected): both decisions are
    listed in the order taken, and the verdict is the record's (an approval outranks a warning;
    a rejection settles the call)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "dig"}]
    for n in range(2):
        messages += [
            {"role": "assistant", "tool_calls": [{"id": f"s{n}", "type": "function", "function": {
                "name": "shell_exec", "arguments": '{"cmd": "ls"}'}}]},
            {"role": "tool", "tool_call_id": f"s{n}", "content": "a.py"},
        ]  # fmt: skip
    messages.append({"role": "assistant", "content": "done"})
    path = tmp_path / "shell.json"
    path.write_text(json.dumps(messages))
    status, report, _ = replay_json(capsys, str(path), "-m", f"{STACKS}:{stack}")
    first, second = report["turns"][0]["calls"]
    assert (first["verdict"], second["verdict"], second["ran"]) == (verdict, verdict, ran)
    assert [d[1] for d in decisions(first)] == [verdict]
    assert [d[1] for d in decisions(second)] == ["warned", verdict]
    assert status == (1 if verdict == "rejected" else 0)
