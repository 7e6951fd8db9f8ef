"""A core install without an extra: every command prints one line naming it and exits 7.

Each command runs in a subprocess whose SDK is hidden (``sys.modules[name] = None`` makes every
import of it fail, as on an install without the extra).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopware_cli._main import EXIT_MISSING_EXTRA, build_parser

ROOT = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:9/v1"


def run_hidden(hidden: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.modules[{hidden!r}] = None\n"
        "from loopware_cli._main import main\n"
        f"raise SystemExit(main({list(argv)!r}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def worker_config(folder: Path) -> Path:
    config = folder / "worker.toml"
    config.write_text(
        f'[runner]\nmodel = "openai-compatible:local@{URL}"\nstore = "memory"\n', encoding="utf-8"
    )
    return config


@pytest.mark.parametrize(
    ("hidden", "extra", "argv"),
    [
        ("openai", "openai", ("run", "hi", "--model", "openai:gpt-4.1-mini")),
        ("openai", "openai", ("run", "hi", "--model", "openai-responses:gpt-4.1-mini")),
        ("openai", "openai", ("run", "hi", "--model", f"openai-compatible:local@{URL}")),
        ("anthropic", "anthropic", ("run", "hi", "--model", "anthropic:claude-sonnet-4-5")),
        ("dbos", "durable", ("worker", "--config", "worker.toml")),
        ("dbos", "durable", ("approve", "--list", "--db", "sqlite:///s.db")),
        ("mcp", "mcp", ("gateway", "--config", "gateway.toml")),
        ("psycopg", "postgres", ("audit", "verify", "postgresql://localhost/audit")),
        ("starlette", "console", ("console", "--audit", "audit.sqlite")),
        ("jinja2", "console", ("console", "--audit", "audit.sqlite")),
    ],
    ids=["run-openai", "run-responses", "run-compatible", "run-anthropic", "worker", "approve",
         "gateway", "audit", "console-starlette", "console-jinja2"],
)
def test_a_command_without_its_extra_prints_one_line_naming_it_and_exits_7(
    hidden: str, extra: str, argv: tuple[str, ...], tmp_path: Path
) -> None:
    worker_config(tmp_path)
    done = run_hidden(hidden, *argv, cwd=tmp_path)
    assert done.returncode == EXIT_MISSING_EXTRA, done.stderr
    assert done.stderr == (
        f"loopware {argv[0]} needs the {extra} extra: pip install 'loopware[{extra}]'\n"
    )
    assert "Traceback" not in done.stdout


def test_exit_7_is_in_the_documented_exit_statuses() -> None:
    assert "  7  any command: it needs an optional extra" in build_parser().format_help()
