"""One process of a Google ADK approval across processes (run by test_approvals).

``pause DIR``: run until the gated call asks for confirmation (``adk_request_confirmation``);
the session lives in DIR/sessions.db (ADK's ``DatabaseSessionService`` on SQLite); save the
confirmation's call id and exit. ``resume DIR yes|no``: a new process answers it. Handler runs
go to DIR/runs; the audit is DIR/audit.jsonl.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.genai import types

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit
from middleware.adapters.adk import LoopwarePlugin
from middleware.audit import AuditLog, JsonlAuditSink

CONFIRM = "adk_request_confirmation"


class Scripted(BaseLlm):
    """Two calls in the first step (one gated), then a final text once a tool answered."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = any(
            part.function_response is not None
            for content in llm_request.contents
            for part in content.parts or []
        )
        if answered:
            parts = [types.Part(text="done")]
        else:
            parts = [
                types.Part(
                    function_call=types.FunctionCall(id="d1", name="delete", args={"path": "a"})
                ),
                types.Part(
                    function_call=types.FunctionCall(id="s1", name="search", args={"q": "x"})
                ),
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


async def main(phase: str, where: Path, decision: str) -> None:
    def ran(line: str) -> None:
        with (where / "runs").open("a") as runs:
            runs.write(line + "\n")

    def delete(path: str) -> str:
        """Delete a file."""
        ran(f"delete:{path}")
        return "deleted"

    def search(q: str) -> str:
        """Search."""
        ran(f"search:{q}")
        return "found"

    sink = JsonlAuditSink(where / "audit.jsonl")
    plugin = LoopwarePlugin(
        middleware=[
            ToolCallLimit({"delete": 1}),
            RepetitionDetector(threshold=2),
            ApprovalGate(["delete"]),
            AuditLog(sink),
        ],
        defer_approvals=True,
    )
    agent = LlmAgent(name="cleaner", model=Scripted(), tools=[delete, search])
    sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{where / 'sessions.db'}")
    runner = Runner(
        app=App(name="cleaner", root_agent=agent, plugins=[plugin]), session_service=sessions
    )
    try:
        if phase == "pause":
            session = await sessions.create_session(app_name="cleaner", user_id="u")
            (where / "session").write_text(session.id)
            message = types.Content(role="user", parts=[types.Part(text="clean up")])
            asked: list[str] = []
            async for event in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            ):
                asked += [str(c.id) for c in event.get_function_calls() if c.name == CONFIRM]
            assert len(asked) == 1, asked
            (where / "confirmation").write_text(asked[0])
        else:
            session_id = (where / "session").read_text()
            answer = types.FunctionResponse(
                id=(where / "confirmation").read_text(),
                name=CONFIRM,
                response={"confirmed": decision == "yes"},
            )
            message = types.Content(role="user", parts=[types.Part(function_response=answer)])
            texts: list[Any] = []
            async for event in runner.run_async(
                user_id="u", session_id=session_id, new_message=message
            ):
                if event.content is not None:
                    texts += [p.text for p in event.content.parts or [] if p.text]
            assert "done" in texts, texts
    finally:
        await runner.close()
        sink.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""))
