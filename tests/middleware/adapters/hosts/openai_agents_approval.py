"""One process of an OpenAI Agents SDK approval across processes (test_approvals).

``pause DIR``: run until the gated call needs approval; write ``result.to_state().to_json()``
to DIR and exit. ``resume DIR yes|no``: a new process loads the ``RunState``, approves or
rejects, and resumes. Handler runs go to DIR/runs; the audit is DIR/audit.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit
from middleware.adapters.openai_agents import Loopware
from middleware.audit import AuditLog, JsonlAuditSink

QUIET = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")


async def main(phase: str, where: Path, decision: str) -> None:
    def ran(line: str) -> None:
        with (where / "runs").open("a") as runs:
            runs.write(line + "\n")

    @function_tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran(f"delete:{path}")
        return "deleted"

    @function_tool
    def search(q: str) -> str:
        """Search."""
        ran(f"search:{q}")
        return "found"

    model = ScriptedModel(
        [
            [
                function_call("delete", {"path": "a"}, call_id="d1"),
                function_call("search", {"q": "x"}, call_id="s1"),
            ],
            [assistant_message("done")],
        ]
    )
    agent: Agent[Any] = Agent(name="cleaner", model=model, tools=[delete, search])
    sink = JsonlAuditSink(where / "audit.jsonl")
    loopware = Loopware(
        middleware=[
            ToolCallLimit({"delete": 1}),
            RepetitionDetector(threshold=2),
            ApprovalGate(["delete"]),
            AuditLog(sink),
        ],
        defer_approvals=True,
    )
    try:
        if phase == "pause":
            result = await loopware.run(agent, "clean up", context={}, run_config=QUIET)
            assert [i.tool_name for i in result.interruptions] == ["delete"]
            (where / "state.json").write_text(json.dumps(result.to_state().to_json()))
        else:
            model = ScriptedModel([[assistant_message("done")]])
            agent = agent.clone(model=model)
            data = json.loads((where / "state.json").read_text())
            state = await RunState.from_json(loopware.agent(agent), data)
            for item in state.get_interruptions():
                if decision == "yes":
                    state.approve(item)
                else:
                    state.reject(item)
            result = await loopware.run(agent, state, run_config=QUIET)
            assert result.final_output == "done"
    finally:
        sink.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""))
