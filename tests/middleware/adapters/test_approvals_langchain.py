"""LangChain: an approval granted (or refused) in a second process after the first exited.

The first process invokes the agent (``invoke`` and ``ainvoke``) until the gated call stops at
``interrupt()``, and exits with the checkpointer's contents saved; a second process resumes
with ``Command(resume=True | False)``. The handler runs exactly once on approval, never on
rejection; the audit has one row per call id and its chain verifies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain", reason="LangChain is not installed (extra 'langchain')")

from ._processes import audited, handler_runs, run_process

SCRIPT = "langchain_approval.py"
MODES = pytest.mark.parametrize("mode", ["invoke", "ainvoke"])


@MODES
def test_an_approval_in_a_second_process_runs_the_call_once(tmp_path: Path, mode: str) -> None:
    run_process(SCRIPT, "pause", str(tmp_path), mode)
    assert handler_runs(tmp_path) == ["search:x"]  # the gated call waits
    run_process(SCRIPT, "resume", str(tmp_path), mode, "yes")
    assert handler_runs(tmp_path) == ["search:x", "delete:a"]
    assert sorted(audited(tmp_path)) == [("d1", "approved"), ("s1", "allowed")]


@MODES
def test_a_rejection_in_a_second_process_never_runs_the_call(tmp_path: Path, mode: str) -> None:
    run_process(SCRIPT, "pause", str(tmp_path), mode)
    run_process(SCRIPT, "resume", str(tmp_path), mode, "no")
    assert handler_runs(tmp_path) == ["search:x"]
    assert sorted(audited(tmp_path)) == [("d1", "rejected"), ("s1", "allowed")]
