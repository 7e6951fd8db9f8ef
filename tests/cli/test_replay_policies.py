"""`loopware replay` with built-in policies set from the command line, and its exit statuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopware_cli._main import main

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def replay_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    status = main(["replay", *args, "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["tool"], c["verdict"]) for t in report["turns"] for c in t["calls"]]


SUPPORT = str(DATA / "support_agent_denied.json")
CODING = str(DATA / "coding_agent_loop.json")


def test_deny_removes_the_tool_and_its_calls_never_run(capsys: pytest.CaptureFixture[str]) -> None:
    """--deny 'shell*' is a ToolPolicy: the shell call is denied, never ran, exit 1."""
    status, report, _ = replay_json(capsys, SUPPORT, "--deny", "shell*")
    assert status == 1
    assert report["middleware"] == ["--deny shell*"]
    shell = [c for t in report["turns"] for c in t["calls"] if c["tool"] == "shell_exec"]
    assert [(c["verdict"], c["ran"], c["offered"]) for c in shell] == [("denied", False, False)]
    assert all(v == "allowed" for tool, v in verdicts(report) if tool != "shell_exec")


def test_allow_denies_every_other_tool(capsys: pytest.CaptureFixture[str]) -> None:
    """--allow names the only tools offered; every other call is denied."""
    status, report, _ = replay_json(
        capsys, SUPPORT, "--allow", "lookup_order", "--allow", "search_kb"
    )
    assert status == 1
    allowed = {"lookup_order", "search_kb"}
    assert all((v == "allowed") == (tool in allowed) for tool, v in verdicts(report))


def test_limit_hides_the_tool_at_its_limit_and_denies_later_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--limit issue_refund=1: the first refund runs and uses up the limit, which hides the tool
    (listed under it); the second is denied by the limit and never runs."""
    status, report, _ = replay_json(capsys, SUPPORT, "--limit", "issue_refund=1")
    refunds = [c for t in report["turns"] for c in t["calls"] if c["tool"] == "issue_refund"]
    assert [(c["verdict"], c["ran"]) for c in refunds] == [("allowed", True), ("denied", False)]
    assert [(d["tool"], d["action"]) for d in refunds[0]["tool_decisions"]] == [
        ("issue_refund", "hidden")
    ]
    assert refunds[1]["decisions"][0]["policy"] == "loopware.limit"
    assert status == 1


def test_total_caps_all_calls_of_a_turn(capsys: pytest.CaptureFixture[str]) -> None:
    """--total 2: the second call of a turn reaches the cap and hides every tool, every later
    one is denied."""
    status, report, _ = replay_json(capsys, CODING, "--total", "2")
    calls = report["turns"][0]["calls"]
    assert [c["verdict"] for c in calls[:2]] == ["allowed", "allowed"]
    assert {d["action"] for d in calls[1]["tool_decisions"]} == {"hidden"}
    assert {c["verdict"] for c in calls[2:]} == {"denied"}
    assert [c["verdict"] for c in report["turns"][1]["calls"]] == ["allowed"]
    assert status == 1


def test_repeat_refuses_the_nth_identical_call_before_it_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--repeat 3: the third identical pytest run and later ones are denied and never ran."""
    status, report, _ = replay_json(capsys, CODING, "--repeat", "3")
    calls = report["turns"][0]["calls"]
    assert [c["verdict"] for c in calls] == ["allowed"] * 4 + ["denied"] * 3
    assert [c["ran"] for c in calls][4:] == [False] * 3
    assert status == 1


def test_window_alone_turns_on_oscillation_detection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--window 4 (threshold 3 implied) refuses the call completing an A-B-A-B alternation."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read"}]
    for n, path in enumerate(("a.py", "b.py", "a.py", "b.py")):
        cid = f"r{n}"
        arguments = json.dumps({"path": path})
        messages += [
            {"role": "assistant", "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": "read", "arguments": arguments}}
            ]},
            {"role": "tool", "tool_call_id": cid, "content": "text"},
        ]  # fmt: skip
    messages.append({"role": "assistant", "content": "done"})
    file = tmp_path / "t.json"
    file.write_text(json.dumps(messages))
    status, report, _ = replay_json(capsys, str(file), "--window", "4")
    assert [v for _, v in verdicts(report)] == ["allowed"] * 3 + ["denied"]
    call = report["turns"][0]["calls"][3]
    assert [(d["policy"], d["action"]) for d in call["decisions"]] == [
        ("loopware.repetition", "denied")
    ]
    assert '{"path": "a.py"} and {"path": "b.py"}' in call["decisions"][0]["reason"]
    assert report["middleware"] == ["--window 4"]
    assert status == 1


def test_approve_none_rejects_and_approve_all_approves(capsys: pytest.CaptureFixture[str]) -> None:
    """--approve-none gates calls and refuses them (rejected, never ran, exit 1);
    --approve-all gates them and approves (approved, ran, exit 0)."""
    status, report, _ = replay_json(capsys, SUPPORT, "--approve-none", "issue_*")
    refunds = [c for t in report["turns"] for c in t["calls"] if c["tool"] == "issue_refund"]
    assert [(c["verdict"], c["ran"]) for c in refunds] == [("rejected", False)] * 2
    assert status == 1
    status, report, _ = replay_json(capsys, SUPPORT, "--approve-all", "issue_*")
    refunds = [c for t in report["turns"] for c in t["calls"] if c["tool"] == "issue_refund"]
    assert [(c["verdict"], c["ran"]) for c in refunds] == [("approved", True)] * 2
    assert status == 0


def test_policy_flags_compose_with_middleware_targets_outermost_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Built-in flags come first, then -m targets, in the report and in the pipelines."""
    _, report, _ = replay_json(
        capsys, SUPPORT, "-m", "middleware:RepetitionDetector", "--deny", "shell*"
    )
    assert report["middleware"] == ["--deny shell*", "middleware:RepetitionDetector"]
    assert report["pipelines"]["tool_call"][0] == "ToolPolicy.deny_call"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "refund"], "expected NAME=N"),
        (["--limit", "refund=x"], "expected NAME=N"),
        (["--total", "-1"], "expected a whole number"),
        (["--repeat", "many"], "expected a whole number"),
        (["--repeat", "1"], "threshold"),
        (["--window", "2"], "window"),
    ],
    ids=["limit-no-equals", "limit-not-int", "total-negative", "repeat-word", "repeat-1", "win-2"],
)
def test_bad_policy_values_are_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A value the option or the policy refuses exits 2 with a message naming it."""
    status = main(["replay", CODING, *args])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert message in captured.err


def test_help_documents_the_policy_flags_and_the_top_level_help_every_exit_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`loopware replay --help` lists each policy option; `loopware --help` every status once."""
    assert main(["replay", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--deny", "--allow", "--limit", "--total", "--repeat", "--window"):
        assert flag in out
    assert "--approve-none" in out
    assert "--approve-all" in out
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for status in ("0", "1", "2", "3", "4", "6", "7"):
        assert f"\n  {status}  " in out
    assert "When several apply, the first of 7, 4, 1, 3, 6 wins" in out


def test_a_refusal_wins_over_model_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad argument JSON alone exits 6 (the call is invalid); with a denied call as well, 1."""
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "search", "arguments": "{"}},
            {"id": "b", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "?"},
        {"role": "tool", "tool_call_id": "b", "content": "?"},
        {"role": "assistant", "content": "y"},
    ]  # fmt: skip
    file = tmp_path / "t.json"
    file.write_text(json.dumps(messages))
    assert main(["replay", str(file)]) == 6
    assert main(["replay", str(file), "--deny", "shell"]) == 1
    capsys.readouterr()
    status, report, _ = replay_json(capsys, str(file), "--deny", "shell")
    assert status == 1
    assert verdicts(report) == [("search", "invalid"), ("shell", "denied")]


def test_many_identical_issues_are_counted_not_repeated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twenty results for unknown ids: three lines, then one line counting the rest."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "x"}]
    messages += [{"role": "tool", "tool_call_ids": [], "content": "?"}] * 20
    file = tmp_path / "t.json"
    file.write_text(json.dumps(messages))
    status = main(["replay", str(file)])
    err = capsys.readouterr().err.splitlines()
    assert status == 3
    assert len(err) == 4
    assert err[-1].endswith("... and 17 more like this (20 in all, first at line 1, messages[1])")


def test_a_refusal_in_a_damaged_transcript_exits_1_not_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed message alone exits 3; a denied call in the readable part still exits 1."""
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "b", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "b", "content": "?"},
        {"role": "wizard", "content": "not a role"},
        {"role": "assistant", "content": "y"},
    ]  # fmt: skip
    file = tmp_path / "t.json"
    file.write_text(json.dumps(messages))
    assert main(["replay", str(file)]) == 3
    assert "messages[3]" in capsys.readouterr().err
    assert main(["replay", str(file), "--deny", "shell"]) == 1
    assert "messages[3]" in capsys.readouterr().err  # the file's error is still reported
