"""Fixtures for the MCP tests: the fixture server's command line and scripted turns."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from pipeline import ToolLoopExecutor, TurnRunner
from pipeline.artifacts import Media, SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

HERE = Path(__file__).resolve().parent
FIXTURE = str(HERE / "fixture_server.py")


def fixture_command(log: Path | None = None, *extra: str) -> list[str]:
    """The fixture server's command line (``--log`` when a call log is wanted)."""
    command = [sys.executable, FIXTURE, *extra]
    if log is not None:
        command += ["--log", str(log)]
    return command


def logged(log: Path) -> list[dict[str, Any]]:
    """The calls a fixture server received, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def scripted(*batches: Sequence[tuple[str, str, str]], answer: str = "done") -> ToolLoopExecutor:
    """An executor whose model proposes each batch of ``(id, tool, arguments)`` in turn."""
    responses = [
        ModelResponse(tool_calls=[ProposedToolCall(id=i, name=n, arguments=a) for i, n, a in b])
        for b in batches
    ]
    return ToolLoopExecutor(ScriptedModel([*responses, ModelResponse(text=answer)]))


def runner(executor: ToolLoopExecutor, tools: Any = (), **options: Any) -> TurnRunner:
    """A runner with ``tools`` and the given options."""
    return TurnRunner(executor=executor, tools=tools, **options)


@pytest.fixture
def call_log(tmp_path: Path) -> Path:
    """Where the fixture server logs the calls it receives."""
    return tmp_path / "calls.jsonl"


def text_of(call: ToolCall) -> str:
    """A record's text: an error message, or the whole body of its artifact."""
    results = call.results
    if isinstance(results, str):
        return results
    assert isinstance(results, SpooledArtifact), results
    return results.as_string()


def media_of(call: ToolCall) -> tuple[Media, ...]:
    """A record's media results."""
    results = call.results
    assert isinstance(results, tuple), results
    assert all(isinstance(m, Media) for m in results)
    return tuple(m for m in results if isinstance(m, Media))
