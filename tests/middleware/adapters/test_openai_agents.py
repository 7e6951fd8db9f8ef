"""`Loopware` on an OpenAI Agents SDK run, offline with the SDK's own `ScriptedModel`.

A hostile model sends 10 parallel calls, repeats a call spelling out a default, and calls a
tool the policy denies; the tests count the tool runs and read the audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "agents", reason="the OpenAI Agents SDK is not installed (extra 'openai-agents')"
)

from agents import Agent, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.adapters.openai_agents import Loopware
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline.errors import PolicyViolationError

from ._nack import assert_audit_ends_at_the_nack
from ._nested import ORDER_ARGS, ORDERED, Item, ordered

Step = list[tuple[str, str, dict[str, Any]]]
QUIET = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")


def _agent(steps: list[Step], runs: list[str]) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(
        [
            *(
                [function_call(name, args, call_id=cid) for cid, name, args in step]
                for step in steps
            ),
            [assistant_message("done")],
        ]
    )

    @function_tool
    async def search(q: str, limit: int = 10) -> str:
        """Search."""
        runs.append(f"search:{q}:{limit}")
        return f"results for {q}"

    @function_tool
    def shell(cmd: str) -> str:
        """Run a shell command."""
        runs.append(f"shell:{cmd}")
        return "ran"

    return Agent(name="hostile", model=model, tools=[search, shell]), model


def _outputs(result: Any) -> dict[str, str]:
    return {
        item.raw_item["call_id"]: str(item.output)
        for item in result.new_items
        if getattr(item, "type", None) == "tool_call_output_item"
    }


def _offered(model: ScriptedModel, step: int) -> list[str]:
    return [getattr(t, "name", "") for t in model.calls[step].tools]


async def test_a_tool_whose_parameters_nest_a_model_runs_under_the_limit() -> None:
    """A function tool taking a pydantic model beside another parameter has a schema with
    ``$defs`` and ``$ref``: 3 calls under a limit of 1 run it once."""
    runs: list[str] = []

    @function_tool
    def order(item: Item, note: str) -> str:
        """Order an item."""
        return ordered(runs, item, note)

    model = ScriptedModel(
        [
            [function_call("order", ORDER_ARGS, call_id=f"c{i}") for i in range(3)],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="orders", model=model, tools=[order])
    result = await Loopware(middleware=[ToolCallLimit({"order": 1})]).run(
        agent, "go", run_config=QUIET
    )
    assert runs == ORDERED
    assert sum("E_CALL_DENIED" in text for text in _outputs(result).values()) == 2


async def test_ten_parallel_calls_under_a_limit_of_three_run_three_tools() -> None:
    """10 parallel calls, limit 3: exactly 3 tool runs; the other 7 read the denial, and the
    next step no longer offers the tool."""
    runs: list[str] = []
    batch = [(f"c{i}", "search", {"q": f"q{i}", "limit": 10}) for i in range(10)]
    agent, model = _agent([batch], runs)
    loopware = Loopware(middleware=[ToolCallLimit({"search": 3})])
    result = await loopware.run(agent, "go", run_config=QUIET)
    assert len(runs) == 3
    outputs = _outputs(result)
    assert sum("E_CALL_DENIED" in text for text in outputs.values()) == 7
    assert "search" not in _offered(model, 1)


async def test_a_repeat_that_spells_out_a_default_is_blocked() -> None:
    """The schema's defaults are filled in before repetition compares: the same search with
    ``limit=10`` spelled out is a repeat, and it never runs."""
    runs: list[str] = []
    steps: list[Step] = [[("a", "search", {"q": "x"})], [("b", "search", {"q": "x", "limit": 10})]]
    agent, _ = _agent(steps, runs)
    loopware = Loopware(middleware=[RepetitionDetector(threshold=2)])
    result = await loopware.run(agent, "go", run_config=QUIET)
    assert len(runs) == 1
    assert "loopware.repetition denied" in _outputs(result)["b"]


async def test_a_denied_tool_is_never_offered_and_never_runs() -> None:
    """`ToolPolicy` withdraws the denied tool: the model is not offered it, and a call naming it
    anyway is refused; the tool never runs."""
    runs: list[str] = []
    batch: Step = [("s", "shell", {"cmd": "ls"}), ("q", "search", {"q": "x", "limit": 1})]
    agent, model = _agent([batch], runs)
    await Loopware(middleware=[ToolPolicy(deny=["shell"])]).run(agent, "go", run_config=QUIET)
    assert "shell" not in _offered(model, 0)
    assert runs == ["search:x:1"]


async def test_the_audit_has_one_row_per_call_id_and_verifies(tmp_path: Path) -> None:
    """Every call id that reached a wrapped tool is one audit row and the chain verifies."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        runs: list[str] = []
        batch = [(f"c{i}", "search", {"q": f"q{i % 2}", "limit": 10}) for i in range(10)]
        agent, _ = _agent([batch], runs)
        stack: list[object] = [
            ToolPolicy(deny=["shell"]),
            ToolCallLimit({"search": 3}),
            RepetitionDetector(threshold=3),
            AuditLog(sink),
        ]
        await Loopware(middleware=stack).run(agent, "go", run_config=QUIET)
        ids = [str(r.entry.call_id) for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sorted(ids) == sorted(f"c{i}" for i in range(10))
        assert sink.verify().ok
        assert len(runs) == 3
    finally:
        sink.close()


async def test_a_nack_ends_the_run_before_the_model_is_asked_again(tmp_path: Path) -> None:
    """A limit that nacks ends the run at the next model step: `Loopware.run` raises the
    nack's `PolicyViolationError`, the model is asked no third time, and each call it made has
    exactly one audit row."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        runs: list[str] = []
        agent, model = _agent([[(f"c{i}", "search", {"q": f"q{i}"})] for i in range(4)], runs)
        loopware = Loopware(
            middleware=[ToolCallLimit({"search": 1}, on_exceed="nack"), AuditLog(sink)]
        )
        with pytest.raises(PolicyViolationError):
            await loopware.run(agent, "go", run_config=QUIET)
        assert runs == ["search:q0:10"]
        assert len(model.calls) == 2
        assert_audit_ends_at_the_nack(sink)
    finally:
        sink.close()
