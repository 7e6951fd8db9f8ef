"""`LoopwareMiddleware` on a LangChain v1 agent, offline with a scripted fake chat model.

A hostile model sends 10 parallel calls, repeats a call spelling out a default, and calls a
tool the policy denies; every test runs through both ``invoke`` (LangChain runs the batch in a
thread pool, in varying order) and ``ainvoke``, counts the tool runs and reads the audit.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Literal

import pytest

pytest.importorskip("langchain", reason="LangChain is not installed (extra 'langchain')")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.adapters.langchain import LoopwareMiddleware
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline.errors import PolicyViolationError

from ._nack import assert_audit_ends_at_the_nack
from ._nested import ORDER_ARGS, ORDERED, Item, ordered

Mode = Literal["invoke", "ainvoke"]
MODES = pytest.mark.parametrize("mode", ["invoke", "ainvoke"])


class Hostile(GenericFakeChatModel):
    """A scripted chat model that records the tools it is offered at every step."""

    offered: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.offered.append([getattr(t, "name", "") for t in tools])
        return self


def _step(*calls: tuple[str, str, dict[str, Any]]) -> AIMessage:
    tool_calls = [{"name": name, "args": args, "id": cid} for cid, name, args in calls]
    return AIMessage(content="", tool_calls=tool_calls)


class Tools:
    """The agent's tools, counting their runs (from any thread)."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self._lock = threading.Lock()

    def build(self) -> list[Any]:
        @tool
        def search(q: str, limit: int = 10) -> str:
            """Search."""
            time.sleep(0.001)
            with self._lock:
                self.runs.append(f"search:{q}:{limit}")
            return f"results for {q}"

        @tool
        def shell(cmd: str) -> str:
            """Run a shell command."""
            with self._lock:
                self.runs.append(f"shell:{cmd}")
            return "ran"

        return [search, shell]


def _run(mode: Mode, steps: list[AIMessage], stack: list[object], tools: Tools) -> Any:
    model = Hostile(messages=iter([*steps, AIMessage(content="done")]))
    loopware = LoopwareMiddleware(middleware=stack)
    agent = create_agent(model, tools=tools.build(), middleware=[loopware])
    state: Any = {"messages": [("user", "go")]}
    result = agent.invoke(state) if mode == "invoke" else asyncio.run(agent.ainvoke(state))
    return model, result


def _tool_messages(result: Any) -> dict[str, ToolMessage]:
    messages: list[BaseMessage] = result["messages"]
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


@MODES
def test_ten_parallel_calls_under_a_limit_of_three_run_the_first_three(mode: Mode) -> None:
    """10 parallel calls, limit 3: exactly 3 tool runs, the first 3 proposed (even when the
    thread pool starts them in another order); the other 7 read an error, and the next step
    is no longer offered the tool."""
    tools = Tools()
    step = _step(*((f"c{i}", "search", {"q": f"q{i}"}) for i in range(10)))
    model, result = _run(mode, [step], [ToolCallLimit({"search": 3})], tools)
    assert sorted(tools.runs) == ["search:q0:10", "search:q1:10", "search:q2:10"]
    answers = _tool_messages(result)
    assert [answers[f"c{i}"].status for i in range(10)] == ["success"] * 3 + ["error"] * 7
    assert "search" not in model.offered[-1]


@MODES
def test_a_tool_whose_parameters_nest_a_model_runs_under_the_limit(mode: Mode) -> None:
    """A tool taking a pydantic model beside another parameter has a schema with ``$defs`` and
    ``$ref``: 3 calls under a limit of 1 run it once."""
    runs: list[str] = []

    @tool
    def order(item: Item, note: str) -> str:
        """Order an item."""
        return ordered(runs, item, note)

    model = Hostile(
        messages=iter(
            [_step(*((f"c{i}", "order", ORDER_ARGS) for i in range(3))), AIMessage(content="done")]
        )
    )
    loopware = LoopwareMiddleware(middleware=[ToolCallLimit({"order": 1})])
    agent = create_agent(model, tools=[order], middleware=[loopware])
    state: Any = {"messages": [("user", "go")]}
    result = agent.invoke(state) if mode == "invoke" else asyncio.run(agent.ainvoke(state))
    assert runs == ORDERED
    statuses = [m.status for m in _tool_messages(result).values()]
    assert sorted(statuses) == ["error", "error", "success"]


@MODES
def test_a_repeat_that_spells_out_a_default_is_blocked(mode: Mode) -> None:
    """The tool's own validation (defaults applied) is what repetition compares: the same
    search with ``limit=10`` spelled out is a repeat and never runs."""
    tools = Tools()
    steps = [_step(("a", "search", {"q": "x"})), _step(("b", "search", {"q": "x", "limit": 10}))]
    _, result = _run(mode, steps, [RepetitionDetector(threshold=2)], tools)
    assert tools.runs == ["search:x:10"]
    answer = _tool_messages(result)["b"]
    assert answer.status == "error"
    assert "loopware.repetition denied" in str(answer.content)


@MODES
def test_a_denied_tool_is_never_offered_and_never_runs(mode: Mode) -> None:
    """`ToolPolicy` withdraws the denied tool: the model is not offered it, and a call naming
    it anyway is answered with an error ``ToolMessage``; the tool never runs."""
    tools = Tools()
    step = _step(("s", "shell", {"cmd": "rm -rf /"}), ("q", "search", {"q": "x"}))
    model, result = _run(mode, [step], [ToolPolicy(deny=["shell"])], tools)
    assert "shell" not in model.offered[0]
    assert tools.runs == ["search:x:10"]
    assert _tool_messages(result)["s"].status == "error"


@MODES
def test_the_audit_has_one_row_per_call_id_and_verifies(mode: Mode, tmp_path: Path) -> None:
    """Every call id, allowed or denied, is one audit row and the chain verifies."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        tools = Tools()
        steps = [
            _step(*((f"c{i}", "search", {"q": f"q{i % 2}"}) for i in range(10))),
            _step(("s", "shell", {"cmd": "ls"})),
        ]
        stack: list[object] = [
            ToolPolicy(deny=["shell"]),
            ToolCallLimit({"search": 3}),
            RepetitionDetector(threshold=3),
            AuditLog(sink),
        ]
        _run(mode, steps, stack, tools)
        ids = [str(r.entry.call_id) for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sorted(ids) == sorted([f"c{i}" for i in range(10)] + ["s"])
        assert sink.verify().ok
        assert len(tools.runs) == 3
    finally:
        sink.close()


@MODES
def test_a_nack_ends_the_invocation_before_the_model_is_asked_again(
    mode: Mode, tmp_path: Path
) -> None:
    """A limit that nacks ends the invocation at the next model step: it raises the nack's
    `PolicyViolationError`, the model's later steps are never asked for, and each call it made
    has exactly one audit row."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        tools = Tools()
        steps = [_step((f"c{i}", "search", {"q": f"q{i}"})) for i in range(4)]
        model = Hostile(messages=iter([*steps, AIMessage(content="done")]))
        stack = [ToolCallLimit({"search": 1}, on_exceed="nack"), AuditLog(sink)]
        agent = create_agent(
            model, tools=tools.build(), middleware=[LoopwareMiddleware(middleware=stack)]
        )
        state: Any = {"messages": [("user", "go")]}
        invoke = agent.invoke if mode == "invoke" else (lambda s: asyncio.run(agent.ainvoke(s)))
        with pytest.raises(PolicyViolationError):
            invoke(state)
        assert tools.runs == ["search:q0:10"]
        assert len(list(model.messages)) == 3  # c2, c3 and the answer were never asked for
        assert_audit_ends_at_the_nack(sink)
    finally:
        sink.close()
