"""Policy middleware: a custom decorated middleware set, a class-based one, and the built-ins.

A stand-in model keeps calling ``search`` with the same query (and once tries ``shell_exec``)
for as long as the tools are offered. The stack stops it:

* `ToolPolicy` removes ``shell*`` tools before the model ever sees them;
* `RepetitionDetector` hides ``search`` at the third identical call;
* `ToolCallLimit` and `IterationBudget` cap the turn if anything else runs away;
* `ToolCallCounter` counts, and a custom `Middleware` set reports.

Every decision about a call lands on the call's record (``call.decisions``, ``call.verdict``,
``call.ran``), and every decision about a tool (hiding ``search``, withdrawing ``shell_exec``)
in ``result.tool_decisions``. Run it with ``python examples/03_policy_middleware.py``.
"""

from __future__ import annotations

import json

from middleware import (
    IterationBudget,
    Middleware,
    RepetitionDetector,
    ToolCallCounter,
    ToolCallLimit,
    ToolPolicy,
    dispatch_output,
)
from pipeline import DispatchContext, ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.events import Log
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return f"3 results for {query!r}"


@tool
def shell_exec(command: str) -> str:
    """Run a shell command."""
    raise RuntimeError("never reached: the policy denies shell tools")


class StubbornModel:
    """A stand-in model that repeats itself while it is offered the tools it likes."""

    def __init__(self) -> None:
        """Start with no calls made."""
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Call the first liked tool that is offered, or answer."""
        offered = {description["name"] for description in request.tools}
        self.calls += 1
        for name, args in (("shell_exec", {"command": "ls"}), ("search", {"query": "refunds"})):
            if name in offered:
                arguments = json.dumps(args)
                call = ProposedToolCall(id=f"call_{self.calls}", name=name, arguments=arguments)
                return ModelResponse(tool_calls=[call])
        return ModelResponse(text=f"I looked {self.calls - 1} times; here is what I found.")


# A custom middleware set: functions registered with one decorator per stage.
custom = Middleware("custom")


@custom.dispatch_output
async def remember_queries(ctx: DispatchContext, call_next: CallNext) -> None:
    """Keep every search query of the turn in the stash (a two-argument middleware)."""
    queries = [call.args["query"] for call in ctx.new_tool_calls if call.tool == "search"]
    if queries:
        ctx.stash.update("custom.queries", lambda seen: [*seen, *queries], default=[])
    await call_next()


@custom.turn_output(order=-10)
def report(ctx: TurnContext) -> None:
    """A one-argument hook: it runs before the rest of the stage, sync or async."""
    ctx.log.info("report", f"{len(ctx.turn_tool_calls)} call(s) this turn")


# A class-based middleware: methods decorated with the module-level decorators.
class ErrorWatch:
    """Warns when a tool fails; one instance can serve any number of turns."""

    def __init__(self, label: str) -> None:
        """Configure the log kind to warn with."""
        self.label = label

    @dispatch_output(order=5)
    def watch(self, ctx: DispatchContext) -> None:
        """Warn about the failed calls of this iteration."""
        for call in ctx.new_tool_calls:
            if call.is_error:
                ctx.log.warning(self.label, f"{call.tool} failed: {call.results}")


def main() -> None:
    runner = TurnRunner(
        executor=ToolLoopExecutor(StubbornModel()),
        tools=[search, shell_exec],
        middleware=[
            ToolPolicy(deny=["shell*"]),
            RepetitionDetector(threshold=3, on_repeat="hide"),
            ToolCallLimit({"search": 10}, total=20),
            IterationBudget(15),
            ToolCallCounter(),
            custom,
            ErrorWatch("tool-errors"),
        ],
    )
    print("pipelines:")
    for stage, names in runner.describe_pipelines().items():
        print(f"  {stage}: {', '.join(names) or '-'}")

    def show(event: Log) -> None:
        if event.kind == "report":
            print(f"  log {event.kind}: {event.message}")

    runner.on(Log, show)
    result = runner.run_sync("How do refunds work?")

    print(f"status: {result.status} after {result.iterations} iteration(s)")
    print(f"output: {result.output}")
    loopware = result.stash["loopware"]
    print(f"counts: {loopware['counter']['total']}")
    print(f"queries: {result.stash['custom']['queries']}")
    for call in result.tool_calls:
        why = call.deciding
        print(
            f"call {call.id}: {call.tool} {call.verdict} (ran: {call.ran})"
            + (f" by {why.policy}: {why.reason}" if why is not None else "")
        )
    for decision in result.tool_decisions:
        print(f"tool {decision.tool}: {decision.action} by {decision.policy}: {decision.reason}")
    result.raise_for_status()


if __name__ == "__main__":
    main()
