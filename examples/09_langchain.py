"""loopware's policies on a LangChain v1 agent: `LoopwareMiddleware` (extra ``langchain``).

A stand-in chat model asks for 6 searches at once plus the first one again with its default
spelled out, then tries a shell tool. The agent is invoked synchronously, so LangChain runs
the batch in a thread pool, in whatever order its threads start; loopware announced the batch
as the model answered, so the limit still goes to the first calls proposed:

* `RepetitionDetector` compares the tool's validated arguments (``limit=5`` spelled out is the
  same call as the first) and refuses the repeat;
* `ToolCallLimit` lets 3 searches run; the rest are answered ``ToolMessage(status="error")``;
* `ToolPolicy` withdraws ``shell``: it is not offered, and a call naming it is refused;
* `AuditLog` keeps one chained row per call id.

Run it with ``python examples/09_langchain.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink


def main() -> None:
    """Invoke the agent once and print what ran, what the model read, and the audit."""
    try:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.tools import tool
    except ImportError:
        print("this example needs LangChain: pip install 'loopware[langchain]'")
        return
    from middleware.adapters.langchain import LoopwareMiddleware

    class StandIn(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            print("offered:", sorted(t.name for t in tools))
            return self

    ran: list[str] = []

    @tool
    def search(q: str, limit: int = 5) -> str:
        """Search the knowledge base."""
        ran.append(q)
        return f"{limit} results for {q!r}"

    @tool
    def shell(cmd: str) -> str:
        """Run a shell command."""
        ran.append(f"shell {cmd}")
        return "ran"

    first = [{"name": "search", "args": {"q": f"q{i}"}, "id": f"s{i}"} for i in range(6)]
    again = {"name": "search", "args": {"q": "q0", "limit": 5}, "id": "again"}
    script = [
        AIMessage(content="", tool_calls=[first[0], again, *first[1:]]),
        AIMessage(content="", tool_calls=[{"name": "shell", "args": {"cmd": "ls"}, "id": "sh"}]),
        AIMessage(content="done"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlAuditSink(Path(tmp) / "audit.jsonl")
        loopware = LoopwareMiddleware(
            middleware=[
                ToolPolicy(deny=["shell"]),
                ToolCallLimit({"search": 3}),
                RepetitionDetector(threshold=2),
                AuditLog(sink),
            ]
        )
        agent = create_agent(
            StandIn(messages=iter(script)), tools=[search, shell], middleware=[loopware]
        )
        state: Any = {"messages": [("user", "look things up")]}
        result = agent.invoke(state)
        print("tools ran for:", sorted(ran))
        for message in result["messages"]:
            if isinstance(message, ToolMessage):
                print(f"  {message.tool_call_id:6} {message.status:7} {str(message.content)[:60]}")
        decisions = [
            f"{row.entry.call_id}:{row.entry.decision}"
            for row in sink.rows()
            if row.entry.kind == "tool_call"
        ]
        print("audit:", ", ".join(decisions))
        print("audit chain intact:", sink.verify().ok)
        sink.close()


if __name__ == "__main__":
    main()
