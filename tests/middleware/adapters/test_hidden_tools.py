"""A call to a tool loopware hid, made anyway, reaches loopware: it is refused with an audit row.

pydantic-ai and the OpenAI Agents SDK answer a call to a tool they do not know themselves, so
the adapters keep hidden tools registered with the host and only leave them out of what the
model is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from middleware import ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink


def _audited(sink: JsonlAuditSink) -> dict[str, str]:
    assert sink.verify().ok
    return {
        str(r.entry.call_id): str(r.entry.decision)
        for r in sink.rows()
        if r.entry.kind == "tool_call"
    }


async def test_pydantic_ai_a_withdrawn_tool_called_anyway_is_audited(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from middleware.adapters.pydantic_ai import LoopwareCapability

    offered: list[list[str]] = []
    runs: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        if len(offered) == 1:
            return ModelResponse(parts=[ToolCallPart("shell", {"cmd": "ls"}, tool_call_id="s")])
        return ModelResponse(parts=[TextPart("done")])

    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        capability = LoopwareCapability(middleware=[ToolPolicy(deny=["shell"]), AuditLog(sink)])
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[capability])

        @agent.tool_plain
        def shell(cmd: str) -> str:
            """Run a command."""
            runs.append(cmd)
            return "ran"

        @agent.tool_plain
        def search(q: str) -> str:
            """Search."""
            return "found"

        await agent.run("go")
        assert offered[0] == ["search"]  # the model is not shown it
        assert runs == []
        assert _audited(sink) == {"s": "denied"}
    finally:
        sink.close()


async def test_openai_agents_a_withdrawn_tool_called_anyway_is_audited(tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed")
    from agents import Agent, RunConfig, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from middleware.adapters.openai_agents import Loopware

    runs: list[str] = []

    @function_tool
    def shell(cmd: str) -> str:
        """Run a command."""
        runs.append(cmd)
        return "ran"

    @function_tool
    def search(q: str) -> str:
        """Search."""
        return "found"

    model = ScriptedModel(
        [[function_call("shell", {"cmd": "ls"}, call_id="s")], [assistant_message("done")]]
    )
    agent: Agent[Any] = Agent(name="a", model=model, tools=[shell, search])
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        loopware = Loopware(middleware=[ToolPolicy(deny=["shell"]), AuditLog(sink)])
        result = await loopware.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
        assert result.final_output == "done"
        assert runs == []
        assert _audited(sink) == {"s": "denied"}
    finally:
        sink.close()
