"""`LoopwarePlugin` on a Google ADK runner, offline with a small scripted `BaseLlm`.

A hostile model sends 10 parallel calls, repeats a call spelling out a default, and calls a
tool the policy denies; the tests count the tool runs and read the audit.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="Google ADK is not installed (extra 'adk')")

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.adapters.adk import LoopwarePlugin
from middleware.audit import AuditLog, JsonlAuditSink

from ._nack import assert_audit_ends_at_the_nack
from ._nested import ORDER_ARGS, ORDERED, Item, ordered

Step = list[tuple[str, str, dict[str, Any]]]


class Hostile(BaseLlm):
    """Each step a batch of (call id, tool, args), then a final text; records what it offered."""

    model: str = "hostile"
    steps: list[Step] = Field(default_factory=list)
    offered: list[list[str]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        step = len(self.offered)
        self.offered.append(sorted(llm_request.tools_dict))
        if step < len(self.steps):
            parts = [
                types.Part(function_call=types.FunctionCall(id=cid, name=name, args=args))
                for cid, name, args in self.steps[step]
            ]
        else:
            parts = [types.Part(text="done")]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


async def _run(
    steps: list[Step], stack: list[object], runs: list[str], errors: list[str] | None = None
) -> tuple[Hostile, dict[str, Any]]:
    def search(q: str, limit: int = 10) -> str:
        """Search."""
        runs.append(f"search:{q}:{limit}")
        return f"results for {q}"

    def shell(cmd: str) -> str:
        """Run a shell command."""
        runs.append(f"shell:{cmd}")
        return "ran"

    model = Hostile(steps=steps, offered=[])
    agent = LlmAgent(name="hostile", model=model, tools=[search, shell])
    app = App(name="hostile", root_agent=agent, plugins=[LoopwarePlugin(middleware=stack)])
    runner = InMemoryRunner(app=app)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    responses: dict[str, Any] = {}
    message = types.Content(role="user", parts=[types.Part(text="go")])
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        for response in event.get_function_responses():
            responses[str(response.id)] = response.response
        if errors is not None and event.error_code:
            errors.append(str(event.error_code))
    await runner.close()
    return model, responses


async def test_ten_parallel_calls_under_a_limit_of_three_run_three_tools() -> None:
    """10 parallel calls, limit 3: exactly 3 tool runs; the other 7 are refused before the
    tool, and the next step no longer offers it."""
    runs: list[str] = []
    batch: Step = [(f"c{i}", "search", {"q": f"q{i}"}) for i in range(10)]
    model, responses = await _run([batch], [ToolCallLimit({"search": 3})], runs)
    assert len(runs) == 3
    assert sum("E_CALL_DENIED" in str(r) for r in responses.values()) == 7
    assert "search" not in model.offered[1]


async def test_a_tool_whose_parameters_nest_a_model_runs_under_the_limit() -> None:
    """A function taking a pydantic model beside another parameter: 3 calls under a limit of 1
    run it once."""
    runs: list[str] = []

    def order(item: Item, note: str) -> str:
        """Order an item."""
        return ordered(runs, item, note)

    model = Hostile(steps=[[(f"c{i}", "order", ORDER_ARGS) for i in range(3)]], offered=[])
    agent = LlmAgent(name="orders", model=model, tools=[order])
    plugin = LoopwarePlugin(middleware=[ToolCallLimit({"order": 1})])
    runner = InMemoryRunner(app=App(name="orders", root_agent=agent, plugins=[plugin]))
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    responses: dict[str, Any] = {}
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        for response in event.get_function_responses():
            responses[str(response.id)] = response.response
    await runner.close()
    assert runs == ORDERED
    assert sum("E_CALL_DENIED" in str(r) for r in responses.values()) == 2


async def test_a_repeat_that_spells_out_a_default_is_blocked() -> None:
    """The function's own defaults are filled in before repetition compares: the same search
    with ``limit=10`` spelled out is a repeat, and it never runs."""
    runs: list[str] = []
    steps: list[Step] = [
        [("a", "search", {"q": "x"})],
        [("b", "search", {"q": "x", "limit": 10})],
    ]
    _, responses = await _run(steps, [RepetitionDetector(threshold=2)], runs)
    assert runs == ["search:x:10"]
    assert "loopware.repetition denied" in str(responses["b"])


async def test_a_denied_tool_is_never_offered_and_never_runs() -> None:
    """`ToolPolicy` withdraws the denied tool: the model is not offered it, and a call naming it
    anyway is refused before the tool."""
    runs: list[str] = []
    batch: Step = [("s", "shell", {"cmd": "ls"}), ("q", "search", {"q": "x"})]
    model, responses = await _run([batch], [ToolPolicy(deny=["shell"])], runs)
    assert "shell" not in model.offered[0]
    assert runs == ["search:x:10"]
    assert "E_TOOL_UNAVAILABLE" in str(responses["s"])


async def test_the_audit_has_one_row_per_call_id_and_verifies(tmp_path: Path) -> None:
    """Every call id, allowed or refused, is one audit row and the chain verifies."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        runs: list[str] = []
        steps: list[Step] = [
            [(f"c{i}", "search", {"q": f"q{i % 2}"}) for i in range(10)],
            [("s", "shell", {"cmd": "ls"})],
        ]
        stack: list[object] = [
            ToolPolicy(deny=["shell"]),
            ToolCallLimit({"search": 3}),
            RepetitionDetector(threshold=3),
            AuditLog(sink),
        ]
        await _run(steps, stack, runs)
        ids = [str(r.entry.call_id) for r in sink.rows() if r.entry.kind == "tool_call"]
        assert sorted(ids) == sorted([f"c{i}" for i in range(10)] + ["s"])
        assert sink.verify().ok
        assert len(runs) == 3
    finally:
        sink.close()


async def test_a_nack_ends_the_run_before_the_model_is_asked_again(tmp_path: Path) -> None:
    """A limit that nacks ends the run at the next model step: the model is asked no third
    time, the step is answered with the nack's error code (ADK's own failed-step response),
    and each call the model made has exactly one audit row."""
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        runs: list[str] = []
        errors: list[str] = []
        steps: list[Step] = [[(f"c{i}", "search", {"q": f"q{i}"})] for i in range(4)]
        stack: list[object] = [ToolCallLimit({"search": 1}, on_exceed="nack"), AuditLog(sink)]
        model, _ = await _run(steps, stack, runs, errors)
        assert errors == ["E_POLICY_VIOLATION"]
        assert len(model.offered) == 2
        assert runs == ["search:q0:10"]
        assert_audit_ends_at_the_nack(sink)
    finally:
        sink.close()


def test_a_tool_whose_function_cannot_be_hashed_still_gets_its_defaults() -> None:
    """The defaults of a tool function are read once and kept by function; a callable that
    cannot be hashed (or weakly referenced) is read every time instead of failing the call."""
    from middleware.adapters._adk import _validated

    class Search:
        __hash__ = None  # type: ignore[assignment]  # an object with __eq__ and no hash

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Search)

        def __call__(self, q: str, limit: int = 10) -> str:
            return q

    class Tool:
        func = Search()

    assert _validated(Tool(), {"q": "x"}) == {"q": "x", "limit": 10}  # type: ignore[arg-type]
    assert _validated(Tool(), {"q": "y", "limit": 3}) == {"q": "y", "limit": 3}  # type: ignore[arg-type]
