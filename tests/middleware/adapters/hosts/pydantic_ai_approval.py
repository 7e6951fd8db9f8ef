"""One process of a pydantic-ai approval across processes (run by test_approvals).

``pause DIR``: run the agent until the gated call defers; write the messages and the
deferred requests' metadata to DIR and exit. ``resume DIR yes|no``: a new process resumes the
run with the decision. Every handler run appends a line to DIR/runs; the audit is DIR/audit.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit
from middleware.adapters.pydantic_ai import LoopwareCapability
from middleware.audit import AuditLog, JsonlAuditSink


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if sum(isinstance(m, ModelResponse) for m in messages) == 0:
        return ModelResponse(
            parts=[
                ToolCallPart("delete", {"path": "a"}, tool_call_id="d1"),
                ToolCallPart("search", {"q": "x"}, tool_call_id="s1"),
            ]
        )
    return ModelResponse(parts=[TextPart("done")])


async def main(phase: str, where: Path, decision: str) -> None:
    sink = JsonlAuditSink(where / "audit.jsonl")
    capability = LoopwareCapability(
        middleware=[
            ToolCallLimit({"delete": 1}),
            RepetitionDetector(threshold=2),
            ApprovalGate(["delete"]),
            AuditLog(sink),
        ],
        defer_approvals=True,
    )
    agent: Agent[None, Any] = Agent(
        FunctionModel(model), capabilities=[capability], output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain
    def delete(path: str) -> str:
        """Delete a file."""
        with (where / "runs").open("a") as runs:
            runs.write(f"delete:{path}\n")
        return "deleted"

    @agent.tool_plain
    def search(q: str) -> str:
        """Search."""
        with (where / "runs").open("a") as runs:
            runs.write(f"search:{q}\n")
        return "found"

    try:
        if phase == "pause":
            result = await agent.run("clean up")
            assert isinstance(result.output, DeferredToolRequests)
            (where / "messages.json").write_bytes(result.all_messages_json())
            (where / "metadata.json").write_text(json.dumps(result.output.metadata))
        else:
            history = ModelMessagesTypeAdapter.validate_json((where / "messages.json").read_bytes())
            metadata = json.loads((where / "metadata.json").read_text())
            results = DeferredToolResults(approvals={"d1": decision == "yes"}, metadata=metadata)
            result = await agent.run(message_history=history, deferred_tool_results=results)
            assert result.output == "done"
    finally:
        sink.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""))
