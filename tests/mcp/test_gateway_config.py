"""The gateway's TOML file is checked up front; every bad key is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopware_cli._gateway_config import GatewayConfigError, load_config

GOOD = """
[[upstream]]
name = "git"
command = ["python", "-m", "mcp_server_git"]
prefix = "git_"
allow = ["git_status"]
timeout = 5
cwd = "repo"

[[upstream]]
url = "http://127.0.0.1:9000/mcp"

[policy]
allow = ["git_*"]
deny = ["git_commit"]

[limits]
total = 10
per_tool = { git_status = 2 }

[repetition]
threshold = 4

[approval]
tools = ["git_add"]
webhook = "https://approvals.example/hook"

[audit]
path = "audit.sqlite"
"""


def test_a_full_file_is_read_with_paths_relative_to_it(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD))
    git, web = config.upstreams
    assert git.server == ("python", "-m", "mcp_server_git")
    assert git.cwd == str(tmp_path / "repo")
    assert git.allow == ("git_status",)
    assert web.server == "http://127.0.0.1:9000/mcp"
    assert config.deny == ("git_commit",)
    assert config.limits == {"git_status": 2}
    assert config.total == 10
    assert config.repetition == 4
    assert config.approval is not None
    assert config.approval.webhook == "https://approvals.example/hook"
    assert config.audit == tmp_path / "audit.sqlite"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


UP = '[[upstream]]\ncommand = ["x"]\n'


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "upstream: give at least one"),
        ("[[upstream]]\n", "give exactly one of command and url"),
        ('[[upstream]]\ncommand = ["x"]\nurl = "http://a"\n', "give exactly one"),
        ('[[upstream]]\nurl = "ftp://a"\n', "upstream[0].url"),
        ("[[upstream]]\ncommand = []\n", "upstream[0].command"),
        ('[[upstream]]\ncommand = ["x"]\ntimeout = 0\n', "upstream[0].timeout"),
        ('[[upstream]]\ncommand = ["x"]\ncolour = 1\n', "unknown keys ['colour']"),
        (UP + "[policy]\ndeny = 'x'\n", "policy.deny"),
        (UP + "[limits]\ntotal = -1\n", "limits.total"),
        (UP + "[limits]\nper_tool = { a = true }\n", "limits.per_tool.a"),
        (UP + '[approval]\ntools = ["a"]\n', "exactly one of command, webhook"),
        (
            UP + '[approval]\ntools = ["a"]\nprompt = true\nwebhook = "http://x"\n',
            "exactly one",
        ),
        (UP + "[audit]\npath = 3\n", "audit.path"),
        (UP + "[nonsense]\n", "unknown tables ['nonsense']"),
        ("not toml = = =", "not valid TOML"),
    ],
    ids=[
        "empty",
        "neither",
        "both",
        "bad-url",
        "empty-command",
        "zero-timeout",
        "unknown-key",
        "deny-string",
        "negative-total",
        "bool-limit",
        "no-approver",
        "two-approvers",
        "audit-int",
        "unknown-table",
        "not-toml",
    ],
)
def test_a_bad_file_names_the_bad_key(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(GatewayConfigError) as info:
        load_config(_write(tmp_path, text))
    assert named in str(info.value)


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
