"""loopware's policies on a Google ADK runner: `LoopwarePlugin` (extra ``adk``).

A small scripted model (an ADK ``BaseLlm``) asks for 6 searches at once plus the first one
again with its default spelled out, then tries a shell tool. The plugin, registered first,
runs each call through loopware's ``tool_call`` stage on its ``function_call_id``; ADK runs
the tool itself when the stage lets it through:

* `RepetitionDetector` compares the arguments with the function's defaults filled in, and
  refuses the repeat;
* `ToolCallLimit` lets 3 searches run; the rest get loopware's refusal as their response;
* `ToolPolicy` withdraws ``shell``: it is not offered, and a call naming it is refused;
* `AuditLog` keeps one chained row per call id.

Run it with ``python examples/11_adk.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink


async def main() -> None:
    """Run one invocation and print what ran and the audit."""
    try:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.models.base_llm import BaseLlm
        from google.adk.models.llm_request import LlmRequest
        from google.adk.models.llm_response import LlmResponse
        from google.adk.runners import InMemoryRunner
        from google.genai import types
    except ImportError:
        print("this example needs Google ADK: pip install 'loopware[adk]'")
        return
    from middleware.adapters.adk import LoopwarePlugin

    first = [("search", {"q": f"q{i}"}, f"s{i}") for i in range(6)]
    script: list[list[tuple[str, dict[str, Any], str]]] = [
        [first[0], ("search", {"q": "q0", "limit": 5}, "again"), *first[1:]],
        [("shell", {"cmd": "ls"}, "sh")],
    ]

    class StandIn(BaseLlm):
        model: str = "stand-in"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            step = sum(1 for c in llm_request.contents if c.role == "model")
            parts = (
                [
                    types.Part(function_call=types.FunctionCall(id=cid, name=name, args=args))
                    for name, args, cid in script[step]
                ]
                if step < len(script)
                else [types.Part(text="done")]
            )
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    ran: list[str] = []

    def search(q: str, limit: int = 5) -> str:
        """Search the knowledge base."""
        ran.append(q)
        return f"{limit} results for {q!r}"

    def shell(cmd: str) -> str:
        """Run a shell command."""
        ran.append(f"shell {cmd}")
        return "ran"

    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlAuditSink(Path(tmp) / "audit.jsonl")
        plugin = LoopwarePlugin(
            middleware=[
                ToolPolicy(deny=["shell"]),
                ToolCallLimit({"search": 3}),
                RepetitionDetector(threshold=2),
                AuditLog(sink),
            ]
        )
        agent = LlmAgent(name="researcher", model=StandIn(), tools=[search, shell])
        runner = InMemoryRunner(app=App(name="research", root_agent=agent, plugins=[plugin]))
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id="me"
        )
        message = types.Content(role="user", parts=[types.Part(text="look things up")])
        async for _ in runner.run_async(user_id="me", session_id=session.id, new_message=message):
            pass
        await runner.close()
        print("tools ran for:", sorted(ran))
        decisions = [
            f"{row.entry.call_id}:{row.entry.decision}"
            for row in sink.rows()
            if row.entry.kind == "tool_call"
        ]
        print("audit:", ", ".join(decisions))
        print("audit chain intact:", sink.verify().ok)
        sink.close()


if __name__ == "__main__":
    asyncio.run(main())
