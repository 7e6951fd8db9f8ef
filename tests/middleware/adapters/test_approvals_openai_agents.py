"""OpenAI Agents SDK: an approval granted (or refused) in a second process after the first exited.

The first process runs until the gated call defers (``needs_approval``) and exits; a second
process resumes from ``RunState`` JSON. The handler runs exactly once on approval, never on
rejection; the audit has one row per call id and its chain verifies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed")

from ._processes import audited, handler_runs, run_process

SCRIPT = "openai_agents_approval.py"


def test_an_approval_in_a_second_process_runs_the_call_once(tmp_path: Path) -> None:
    run_process(SCRIPT, "pause", str(tmp_path))
    assert handler_runs(tmp_path) == ["search:x"]  # the gated call waits
    run_process(SCRIPT, "resume", str(tmp_path), "yes")
    assert handler_runs(tmp_path) == ["search:x", "delete:a"]
    assert sorted(audited(tmp_path)) == [("d1", "approved"), ("s1", "allowed")]


def test_a_rejection_in_a_second_process_never_runs_the_call(tmp_path: Path) -> None:
    run_process(SCRIPT, "pause", str(tmp_path))
    run_process(SCRIPT, "resume", str(tmp_path), "no")
    assert handler_runs(tmp_path) == ["search:x"]
    assert sorted(audited(tmp_path)) == [("d1", "rejected"), ("s1", "allowed")]
