"""The `loopware` command itself: help, usage errors, `pipelines`, and the installed script."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loopware_cli._main import main

REPO = Path(__file__).resolve().parents[2]
STACKS = "tests.data.replay_stacks"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root, so ``tests.data.replay_stacks`` is importable."""
    monkeypatch.chdir(REPO)


def test_help_lists_every_subcommand_and_the_exit_statuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`loopware --help` names demo, replay and pipelines and documents statuses 0 to 4."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: loopware")
    for command in ("demo", "replay", "pipelines"):
        assert re.search(rf"^    {command} ", out, re.MULTILINE)
    for status in range(8):
        assert f"\n  {status}  " in out


@pytest.mark.parametrize("command", ["demo", "replay", "pipelines"])
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each subcommand answers --help with its usage and where the exit statuses are, status 0."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: loopware {command}")
    assert out.rstrip().endswith("exit status: listed once, in `loopware --help`")


def test_replay_help_documents_the_input_formats(capsys: pytest.CaptureFixture[str]) -> None:
    """The replay help says which transcripts it reads and what --middleware accepts."""
    main(["replay", "--help"])
    out = capsys.readouterr().out
    for words in ("tool_calls", "tool_use", "JSON Lines", "--middleware", "--json"):
        assert words in out


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["replay"], ["replay", "t.json", "--bogus"], ["pipelines"]],
    ids=["nothing", "unknown-command", "missing-transcript", "unknown-option", "missing-target"],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Missing or unknown arguments are usage errors (status 2) with a message on stderr."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "usage: loopware" in captured.err


def test_version_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    """`loopware --version` prints the distribution version."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("loopware ")


def test_pipelines_prints_every_stage_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    """A runner factory's stages are printed with their middleware, outermost first."""
    assert main(["pipelines", f"{STACKS}:support_runner"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"loopware pipelines: {STACKS}:support_runner",
        "turn_input:",
        "  1. ToolPolicy.restrict",
        "dispatch_input:",
        "  (none)",
        "tool_call:",
        "  1. ToolPolicy.deny_call",
        "  2. ToolCallLimit.reserve",
        "dispatch_output:",
        "  1. ToolPolicy.enforce",
        "  2. ToolCallLimit.tally",
        "turn_output:",
        "  1. ToolPolicy.enforce_late",
        "  2. ToolCallLimit.tally_late",
    ]


def test_pipelines_json_is_describe_pipelines(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints what ``runner.describe_pipelines()`` returns, keyed by stage."""
    assert main(["pipelines", f"{STACKS}:support_runner", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "turn_input": ["ToolPolicy.restrict"],
        "dispatch_input": [],
        "tool_call": ["ToolPolicy.deny_call", "ToolCallLimit.reserve"],
        "dispatch_output": ["ToolPolicy.enforce", "ToolCallLimit.tally"],
        "turn_output": ["ToolPolicy.enforce_late", "ToolCallLimit.tally_late"],
    }


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("runner", "is not of the form module:attr"),
        ("no_such_module_for_loopware:runner", "cannot import module"),
        (f"{STACKS}:nope", "has no attribute 'nope'"),
        (f"{STACKS}:NOT_MIDDLEWARE", "is int, not a TurnRunner"),
        (f"{STACKS}:coding_stack", "returned list, not a TurnRunner"),
        (f"{STACKS}:broken_factory", "raised RuntimeError"),
    ],
    ids=["syntax", "import", "attribute", "not-callable", "wrong-type", "raises"],
)
def test_pipelines_rejects_bad_targets_with_status_4(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Anything that does not resolve to a TurnRunner exits 4 and says why."""
    assert main(["pipelines", target]) == 4
    err = capsys.readouterr().err
    assert err.startswith("loopware pipelines: error: E_INVALID_TURN_RUNNER_CONFIG: ")
    assert message in err


def _installed_script() -> Path:
    script = Path(sys.executable).parent / ("loopware.exe" if os.name == "nt" else "loopware")
    if not script.exists():
        pytest.skip(f"the loopware console script is not installed next to {sys.executable}")
    return script


def test_installed_console_script_runs_help_demo_and_replay(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The real `loopware` script: --help, a plain demo, and replay's status 1."""
    script = _installed_script()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["PYTHONPATH"] = str(REPO)
    env["TMPDIR"] = str(tmp_path_factory.mktemp("system-tmp"))  # the demo's audit file
    helped = subprocess.run(
        [script, "--help"], capture_output=True, text=True, env=env, check=False, timeout=60
    )
    assert helped.returncode == 0
    assert "replay" in helped.stdout
    demo = subprocess.run(
        [script, "demo"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
    )
    assert demo.returncode == 0, demo.stderr
    assert "\x1b[" not in demo.stdout  # piped: plain text
    assert "  audit verified  yes" in demo.stdout.splitlines()
    assert list(tmp_path.iterdir()) == []  # the audit file is a temporary one
    replayed = subprocess.run(
        [
            script,
            "replay",
            str(REPO / "tests" / "data" / "support_agent_denied.json"),
            "--middleware",
            f"{STACKS}:support_stack",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert replayed.returncode == 1, replayed.stderr
    assert "2 denied" in replayed.stdout
