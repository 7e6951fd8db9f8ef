"""loopware's policies on a pydantic-ai agent: `LoopwareCapability` (extra ``pydantic-ai``).

A stand-in model (pydantic-ai's own ``FunctionModel``) asks for 6 searches at once plus the
first one again with its default spelled out, then tries a shell tool. The capability runs
each call through loopware's ``tool_call`` stage on its ``tool_call_id``:

* `RepetitionDetector` compares pydantic-ai's validated arguments, so ``limit=5`` spelled out
  is the same call as the first, and it is refused;
* `ToolCallLimit` lets 3 searches run; the other 3 read why they did not, and ``search`` is
  no longer offered;
* `ToolPolicy` withdraws ``shell``: the model is never offered it, and pydantic-ai itself
  answers a call to a tool it was not offered (such a call never reaches loopware);
* `AuditLog` keeps one chained row per call id.

Run it with ``python examples/08_pydantic_ai.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink


async def main() -> None:
    """Run the agent once and print what ran, what was refused, and the audit's verdicts."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        print("this example needs pydantic-ai: pip install 'loopware[pydantic-ai]'")
        return
    from middleware.adapters.pydantic_ai import LoopwareCapability

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step == 0:
            print("offered:", sorted(t.name for t in info.function_tools))
            calls = [ToolCallPart("search", {"q": f"q{i}"}, tool_call_id=f"s{i}") for i in range(6)]
            again = ToolCallPart("search", {"q": "q0", "limit": 5}, tool_call_id="again")
            return ModelResponse(parts=[calls[0], again, *calls[1:]])
        if step == 1:
            print("offered next:", sorted(t.name for t in info.function_tools))
            shell = ToolCallPart("shell", {"cmd": "rm -rf /"}, tool_call_id="sh")
            return ModelResponse(parts=[shell])
        return ModelResponse(parts=[TextPart("done")])

    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlAuditSink(Path(tmp) / "audit.jsonl")
        capability = LoopwareCapability(
            middleware=[
                ToolPolicy(deny=["shell"]),
                ToolCallLimit({"search": 3}),
                RepetitionDetector(threshold=2),
                AuditLog(sink),
            ]
        )
        agent = Agent(FunctionModel(model), capabilities=[capability])
        ran: list[str] = []

        @agent.tool_plain
        async def search(q: str, limit: int = 5) -> str:
            """Search the knowledge base."""
            ran.append(q)
            return f"{limit} results for {q!r}"

        @agent.tool_plain
        def shell(cmd: str) -> str:
            """Run a shell command."""
            ran.append(f"shell {cmd}")
            return "ran"

        result = await agent.run("look things up")
        print("handlers ran for:", ran)
        print("answer:", result.output)
        for row in sink.rows():
            if row.entry.kind == "tool_call":
                print(f"  audit {row.entry.call_id:6} {row.entry.decision}")
        print("audit chain intact:", sink.verify().ok)
        sink.close()


if __name__ == "__main__":
    asyncio.run(main())
