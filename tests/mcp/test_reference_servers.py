"""Turns whose tools come from real MCP servers from PyPI (mcp-server-time, mcp-server-git),
run as subprocesses, under policies that deny and limit some of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp_server_time")
pytest.importorskip("mcp_server_git")

from middleware import ToolCallLimit, ToolPolicy
from pipeline.mcp import MCPToolset
from tests.mcp.conftest import runner, scripted, text_of

TIME = [sys.executable, "-m", "mcp_server_time"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=T"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "notes.txt").write_text("first\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], check=True)
    (path / "notes.txt").write_text("first\nsecond\n")
    return path


def git_log(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "log", "--oneline"], capture_output=True, text=True, check=True
    ).stdout


async def test_time_server_tools_run_in_a_turn_with_the_servers_schema_and_description() -> None:
    async with MCPToolset(TIME, prefix="time_") as time:
        assert [t.name for t in time] == ["time_get_current_time", "time_convert_time"]
        current = time.tools[0]
        assert "timezone" in current.describe()["input_schema"]["required"]
        assert current.description
        assert not current.trusted
        executor = scripted(
            [
                ("a", "time_get_current_time", '{"timezone": "Europe/Oslo"}'),
                ("b", "time_get_current_time", '{"timezone": 1}'),
                ("c", "time_get_current_time", '{"timezone": "Not/AZone"}'),
            ]
        )
        result = await runner(executor, time).run("What time is it in Oslo?")
    good, bad_args, bad_zone = result.tool_calls
    assert not good.is_error
    assert json.loads(text_of(good))["timezone"] == "Europe/Oslo"
    assert bad_args.is_error
    assert "E_INVALID_TOOL_ARGS" in text_of(bad_args)
    assert bad_zone.is_error  # the server's own isError (or protocol error) is an error call
    assert result.status == "completed"


async def test_git_server_under_a_policy_that_denies_commits_and_limits_status(repo: Path) -> None:
    before = git_log(repo)
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    args = json.dumps({"repo_path": str(repo)})
    commit = json.dumps({"repo_path": str(repo), "message": "sneaky"})
    async with MCPToolset(command, prefix="repo_", timeout=30) as git:
        executor = scripted(
            [("s1", "repo_git_status", args), ("c1", "repo_git_commit", commit)],
            [("s2", "repo_git_status", args), ("d1", "repo_git_diff_unstaged", args)],
        )
        result = await runner(
            executor,
            git,
            middleware=[
                ToolPolicy(deny=["repo_git_commit", "repo_git_reset", "repo_git_add"]),
                ToolCallLimit({"repo_git_status": 1}),
            ],
        ).run("What changed?")
    status, commit_call, status_again, diff = result.tool_calls
    assert not status.is_error
    assert "notes.txt" in text_of(status)
    assert (commit_call.verdict, commit_call.ran) == ("denied", False)
    assert text_of(commit_call).startswith(
        "Error: E_TOOL_UNAVAILABLE: tool 'repo_git_commit' is no longer available in this turn "
        "(loopware.policy: matches deny pattern 'repo_git_commit')"
    )
    # the limit of one status call hid the tool: the second is denied by the limit, not run
    assert (status_again.verdict, status_again.ran) == ("denied", False)
    assert status_again.deciding is not None
    assert status_again.deciding.policy == "loopware.limit"
    assert [(d.tool, d.action, d.call_id) for d in result.tool_decisions][-1] == (
        "repo_git_status",
        "hidden",
        "s1",
    )
    assert not diff.is_error
    assert "+second" in text_of(diff)
    assert git_log(repo) == before  # the denied commit never reached the server


async def test_the_allow_list_keeps_only_the_named_server_tools(repo: Path) -> None:
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    async with MCPToolset(command, allow=["git_log", "git_show"]) as git:
        assert [t.name for t in git] == ["git_log", "git_show"]
