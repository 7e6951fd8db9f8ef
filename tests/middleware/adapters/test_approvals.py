"""Each host: an approval granted (or refused) in a second process after the first exited.

The first process runs until the gated call pauses with that host's own machinery and exits; a
second process resumes it with the answer:

* pydantic-ai: the call defers (``ApprovalRequired``), resumed with ``DeferredToolResults``;
* OpenAI Agents SDK: ``needs_approval``, resumed from ``RunState`` JSON;
* LangChain (``invoke`` and ``ainvoke``): ``interrupt()`` with the checkpointer's contents
  saved, resumed with ``Command(resume=True | False)``;
* Google ADK: ``request_confirmation``, answered with the session read from ADK's SQLite store.

The handler runs exactly once on approval, never on rejection; the audit has one row per call
id and its chain verifies.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ._processes import audited, handler_runs, run_process

HOSTS = [
    pytest.param("pydantic_ai", "pydantic_ai_approval.py", (), id="pydantic-ai"),
    pytest.param("agents", "openai_agents_approval.py", (), id="openai-agents"),
    pytest.param("langchain", "langchain_approval.py", ("invoke",), id="langchain-invoke"),
    pytest.param("langchain", "langchain_approval.py", ("ainvoke",), id="langchain-ainvoke"),
    pytest.param("google.adk", "adk_approval.py", (), id="adk"),
]


def _host(package: str) -> None:
    """Skip unless the host's SDK is installed (its extra)."""
    top = package.split(".")[0]
    if importlib.util.find_spec(top) is None or importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")


@pytest.mark.parametrize(("package", "script", "mode"), HOSTS)
def test_an_approval_in_a_second_process_runs_the_call_once(
    tmp_path: Path, package: str, script: str, mode: tuple[str, ...]
) -> None:
    _host(package)
    run_process(script, "pause", str(tmp_path), *mode)
    assert handler_runs(tmp_path) == ["search:x"]  # the gated call waits
    run_process(script, "resume", str(tmp_path), *mode, "yes")
    assert handler_runs(tmp_path) == ["search:x", "delete:a"]
    assert sorted(audited(tmp_path)) == [("d1", "approved"), ("s1", "allowed")]


@pytest.mark.parametrize(("package", "script", "mode"), HOSTS)
def test_a_rejection_in_a_second_process_never_runs_the_call(
    tmp_path: Path, package: str, script: str, mode: tuple[str, ...]
) -> None:
    _host(package)
    run_process(script, "pause", str(tmp_path), *mode)
    run_process(script, "resume", str(tmp_path), *mode, "no")
    assert handler_runs(tmp_path) == ["search:x"]
    assert sorted(audited(tmp_path)) == [("d1", "rejected"), ("s1", "allowed")]
