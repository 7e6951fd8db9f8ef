"""`LoopwareCapability` on a pydantic-ai agent, offline with pydantic-ai's `FunctionModel`.

A hostile model sends 10 parallel calls, repeats a call spelling out a default, and calls a
tool the policy denies; the tests count the handler runs and read the audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (extra 'pydantic-ai')")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.adapters.pydantic_ai import LoopwareCapability
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline.errors import PolicyViolationError
from pipeline.stores import MemoryStore

from ._nack import assert_audit_ends_at_the_nack
from ._nested import ORDER_ARGS, ORDERED, Item, ordered

Step = list[tuple[str, str, dict[str, Any]]]


class Hostile:
    """A scripted model: each step a batch of (call id, tool, args); then it answers."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.offered: list[list[str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append([t.name for t in info.function_tools])
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(self.steps):
            batch = self.steps[step]
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in batch]
            )
        return ModelResponse(parts=[TextPart("done")])


def _agent(model: Hostile, capability: LoopwareCapability, runs: list[str]) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    async def search(q: str, limit: int = 10) -> str:
        """Search."""
        runs.append(f"search:{q}:{limit}")
        return f"results for {q}"

    @agent.tool_plain
    def shell(cmd: str) -> str:
        """Run a shell command."""
        runs.append(f"shell:{cmd}")
        return "ran"

    @agent.tool_plain
    def flaky() -> str:
        """Ask for a retry."""
        runs.append("flaky")
        raise ModelRetry("not yet")

    return agent


def _returns(agent_messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    return {
        part.tool_call_id: part
        for message in agent_messages
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    }


async def test_ten_parallel_calls_under_a_limit_of_three_run_three_handlers() -> None:
    """10 parallel calls, limit 3: exactly 3 handler runs; the other 7 read the denial, and the
    next step no longer offers the tool."""
    runs: list[str] = []
    model = Hostile([[(f"c{i}", "search", {"q": f"q{i}"}) for i in range(10)]])
    capability = LoopwareCapability(middleware=[ToolCallLimit({"search": 3})])
    result = await _agent(model, capability, runs).run("go")
    assert len(runs) == 3
    returns = _returns(result.all_messages())
    denied = [cid for cid, part in returns.items() if "E_CALL_DENIED" in str(part.content)]
    assert len(denied) == 7
    assert "search" not in model.offered[1]


async def test_a_tool_whose_parameters_nest_a_model_runs_under_the_limit() -> None:
    """A tool taking a pydantic model beside another parameter has a schema with ``$defs`` and
    ``$ref``: it is offered as pydantic-ai shows it, and 3 calls under a limit of 1 run once."""
    runs: list[str] = []
    model = Hostile([[(f"c{i}", "order", ORDER_ARGS) for i in range(3)]])
    agent = Agent(
        FunctionModel(model),
        capabilities=[LoopwareCapability(middleware=[ToolCallLimit({"order": 1})])],
    )

    @agent.tool_plain
    def order(item: Item, note: str) -> str:
        """Order an item."""
        return ordered(runs, item, note)

    result = await agent.run("go")
    assert runs == ORDERED
    returns = _returns(result.all_messages())
    assert sum("E_CALL_DENIED" in str(part.content) for part in returns.values()) == 2


async def test_a_repeat_that_spells_out_a_default_is_blocked() -> None:
    """pydantic-ai's validated arguments (defaults applied) are what repetition compares: the
    same search with ``limit=10`` spelled out is a repeat, and its handler never runs."""
    runs: list[str] = []
    model = Hostile(
        [[("a", "search", {"q": "x"})], [("b", "search", {"q": "x", "limit": 10})]]
    )
    capability = LoopwareCapability(middleware=[RepetitionDetector(threshold=2)])
    result = await _agent(model, capability, runs).run("go")
    assert runs == ["search:x:10"]
    assert "loopware.repetition denied" in str(_returns(result.all_messages())["b"].content)


async def test_a_denied_tool_is_never_offered_and_never_runs() -> None:
    """`ToolPolicy` withdraws the denied tool: the model is not offered it, and a call naming it
    anyway never reaches its function."""
    runs: list[str] = []
    model = Hostile([[("s", "shell", {"cmd": "rm -rf /"}), ("q", "search", {"q": "x"})]])
    capability = LoopwareCapability(middleware=[ToolPolicy(deny=["shell"])])
    await _agent(model, capability, runs).run("go")
    assert "shell" not in model.offered[0]
    assert runs == ["search:x:10"]


async def test_a_model_retry_stays_pydantic_ai_s_control_flow() -> None:
    """A tool that raises ``ModelRetry`` still asks the model to retry (loopware records the
    call as an error and re-raises the host's exception)."""
    runs: list[str] = []
    model = Hostile([[("f", "flaky", {})]])
    capability = LoopwareCapability(middleware=[])
    result = await _agent(model, capability, runs).run("go")
    assert runs == ["flaky"]
    assert result.output == "done"


async def test_the_audit_has_one_row_per_call_id_and_verifies(tmp_path: Path) -> None:
    """Every call that reached the hook is one audit row (allowed and denied alike) and the
    chain verifies; runs of one conversation share the limit."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        runs: list[str] = []
        model = Hostile([[(f"c{i}", "search", {"q": f"q{i}"}) for i in range(10)]])
        capability = LoopwareCapability(
            middleware=[
                ToolPolicy(deny=["shell"]),
                ToolCallLimit({"search": 3}),
                RepetitionDetector(),
                AuditLog(sink),
            ]
        )
        await _agent(model, capability, runs).run("go")
        ids = [str(r.entry.call_id) for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sorted(ids) == sorted(f"c{i}" for i in range(10))
        assert sink.verify().ok
        assert len(runs) == 3
    finally:
        sink.close()


async def test_each_run_is_its_own_turn() -> None:
    """A capability serves many runs: each run is a turn of its own (its limit starts afresh)."""
    runs: list[str] = []
    capability = LoopwareCapability(middleware=[ToolCallLimit({"search": 1})])
    for _ in range(2):
        model = Hostile([[("a", "search", {"q": "x"}), ("b", "search", {"q": "y"})]])
        await _agent(model, capability, runs).run("go")
    assert len(runs) == 2


@pytest.mark.parametrize("keeps", [True, False], ids=["store", "no-store"])
async def test_runs_of_a_conversation_share_history_only_in_a_given_store(keeps: bool) -> None:
    """Given a store, runs of one conversation are turns of one loopware conversation (a repeat
    in the second run counts the first); without one, each run stands alone (nothing kept)."""
    runs: list[str] = []
    capability = LoopwareCapability(
        middleware=[RepetitionDetector(threshold=2)], store=MemoryStore() if keeps else None
    )
    for cid in ("a", "b"):
        model = Hostile([[(cid, "search", {"q": "x"})]])
        await _agent(model, capability, runs).run("go", conversation_id="thread-1")
    assert len(runs) == (1 if keeps else 2)


async def test_a_nack_ends_the_run_before_the_model_is_asked_again(tmp_path: Path) -> None:
    """A limit that nacks ends the pydantic-ai run at the next model step: the run raises the
    nack's `PolicyViolationError`, the model is asked no third time, and each call it made has
    exactly one audit row (none is left unrecorded after the turn ended)."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        runs: list[str] = []
        model = Hostile([[(f"c{i}", "search", {"q": f"q{i}"})] for i in range(4)])
        capability = LoopwareCapability(
            middleware=[ToolCallLimit({"search": 1}, on_exceed="nack"), AuditLog(sink)]
        )
        with pytest.raises(PolicyViolationError) as raised:
            await _agent(model, capability, runs).run("go")
        assert raised.value.code == "E_POLICY_VIOLATION"
        assert runs == ["search:q0:10"]
        assert len(model.offered) == 2
        assert_audit_ends_at_the_nack(sink)
    finally:
        sink.close()
