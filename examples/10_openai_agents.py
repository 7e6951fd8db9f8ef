"""loopware's policies on an OpenAI Agents SDK run: `Loopware` (extra ``openai-agents``).

A stand-in model (the SDK's own ``ScriptedModel``) asks for 6 searches at once plus the first
one again, then tries a shell tool. ``Loopware.run`` runs the agent as one loopware turn, its
function tools wrapped so each call goes through loopware's ``tool_call`` stage on its
``tool_call_id``:

* `RepetitionDetector` refuses the repeated search;
* `ToolCallLimit` lets 3 searches run; the rest read why they did not, as the tool's output;
* `ToolPolicy` withdraws ``shell``: it is not offered, and a call naming it reads an error;
* `AuditLog` keeps one chained row per call id.

Run it with ``python examples/10_openai_agents.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from middleware import RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.audit import AuditLog, JsonlAuditSink


async def main() -> None:
    """Run the agent once and print what ran, what the model read, and the audit."""
    try:
        from agents import Agent, RunConfig, function_tool
        from agents.testing import ScriptedModel, assistant_message, function_call
    except ImportError:
        print("this example needs the OpenAI Agents SDK: pip install 'loopware[openai-agents]'")
        return
    from middleware.adapters.openai_agents import Loopware

    ran: list[str] = []

    @function_tool
    async def search(q: str) -> str:
        """Search the knowledge base."""
        ran.append(q)
        return f"results for {q!r}"

    @function_tool
    def shell(cmd: str) -> str:
        """Run a shell command."""
        ran.append(f"shell {cmd}")
        return "ran"

    first = [function_call("search", {"q": f"q{i}"}, call_id=f"s{i}") for i in range(6)]
    again = function_call("search", {"q": "q0"}, call_id="again")
    model = ScriptedModel(
        [
            [first[0], again, *first[1:]],
            [function_call("shell", {"cmd": "ls"}, call_id="sh")],
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="researcher", model=model, tools=[search, shell])
    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlAuditSink(Path(tmp) / "audit.jsonl")
        loopware = Loopware(
            middleware=[
                ToolPolicy(deny=["shell"]),
                ToolCallLimit({"search": 3}),
                RepetitionDetector(threshold=2),
                AuditLog(sink),
            ]
        )
        quiet = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")
        result = await loopware.run(agent, "look things up", run_config=quiet)
        print("tools ran for:", sorted(ran))
        print("answer:", result.final_output)
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
