"""Run one host process of an approval across processes, and read what it left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from middleware.audit import JsonlAuditSink

HOSTS = Path(__file__).parent / "hosts"


def run_process(script: str, *args: str) -> None:
    """Run ``hosts/<script>`` in a new Python process; fail with its output if it fails."""
    done = subprocess.run(
        [sys.executable, str(HOSTS / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def handler_runs(where: Path) -> list[str]:
    """The handler runs every process recorded, in order."""
    runs = where / "runs"
    return runs.read_text().splitlines() if runs.exists() else []


def audited(where: Path) -> list[tuple[str, str]]:
    """The audit's (call id, decision) of every tool_call row; the chain must verify."""
    sink = JsonlAuditSink(where / "audit.jsonl")
    try:
        assert sink.verify().ok
        return [
            (str(row.entry.call_id), str(row.entry.decision))
            for row in sink.rows()
            if row.entry.kind == "tool_call"
        ]
    finally:
        sink.close()
