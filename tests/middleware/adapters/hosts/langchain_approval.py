"""One process of a LangChain approval across processes (run by test_approvals).

``pause DIR MODE``: invoke the agent (``invoke`` or ``ainvoke``) until the gated call
interrupts; save the checkpointer's contents to DIR and exit. ``resume DIR MODE yes|no``: a new
process loads them and resumes with ``Command(resume=...)``. Handler runs go to DIR/runs; the
audit is DIR/audit.jsonl. (langgraph-checkpoint-sqlite is not a dependency: `FileSaver` keeps
the in-memory saver's plain contents in a file between the processes.)
"""

from __future__ import annotations

import asyncio
import pickle
import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit
from middleware.adapters.langchain import LoopwareMiddleware
from middleware.audit import AuditLog, JsonlAuditSink


class Fake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class FileSaver(InMemorySaver):
    """An in-memory checkpointer whose contents are saved to and loaded from a file."""

    def load(self, path: Path) -> None:
        storage, writes, blobs = pickle.loads(path.read_bytes())
        for thread, namespaces in storage.items():
            for ns, checkpoints in namespaces.items():
                self.storage[thread][ns].update(checkpoints)
        self.writes.update(writes)
        self.blobs.update(blobs)

    def save(self, path: Path) -> None:
        storage = {t: {ns: dict(c) for ns, c in n.items()} for t, n in self.storage.items()}
        path.write_bytes(pickle.dumps((storage, dict(self.writes), dict(self.blobs))))


def main(phase: str, where: Path, mode: str, decision: str) -> None:
    def ran(line: str) -> None:
        with (where / "runs").open("a") as runs:
            runs.write(line + "\n")

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran(f"delete:{path}")
        return "deleted"

    @tool
    def search(q: str) -> str:
        """Search."""
        ran(f"search:{q}")
        return "found"

    calls = [
        {"name": "delete", "args": {"path": "a"}, "id": "d1"},
        {"name": "search", "args": {"q": "x"}, "id": "s1"},
    ]
    script = [AIMessage(content="", tool_calls=calls), AIMessage(content="done")]
    if phase == "resume":
        script = script[1:]
    sink = JsonlAuditSink(where / "audit.jsonl")
    loopware = LoopwareMiddleware(
        middleware=[
            ToolCallLimit({"delete": 1}),
            RepetitionDetector(threshold=2),
            ApprovalGate(["delete"]),
            AuditLog(sink),
        ],
        defer_approvals=True,
    )
    saver = FileSaver()
    saved = where / "checkpoints.pickle"
    if saved.exists():
        saver.load(saved)
    agent = create_agent(
        Fake(messages=iter(script)),
        tools=[delete, search],
        middleware=[loopware],
        checkpointer=saver,
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    given: Any = {"messages": [("user", "clean up")]}
    if phase == "resume":
        given = Command(resume=decision == "yes")
    try:
        if mode == "invoke":
            result = agent.invoke(given, config)
            loopware.close()
        else:

            async def run() -> Any:
                answer = await agent.ainvoke(given, config)
                await loopware.aclose()
                return answer

            result = asyncio.run(run())
        if phase == "pause":
            assert "__interrupt__" in result, result
        else:
            assert result["messages"][-1].content == "done", result
    finally:
        sink.close()
    saver.save(saved)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
