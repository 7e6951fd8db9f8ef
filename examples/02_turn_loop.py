"""A scripted turn: the tool-calling loop end to end, printing its event trace.

``ScriptedModel`` stands in for a real model, so this runs offline and deterministically. The
model first proposes two calls (one with bad arguments, which becomes an error call the model
reads), then a corrected call, then answers. A dispatch output middleware counts the calls.

Run it with ``python examples/02_turn_loop.py``.
"""

from __future__ import annotations

import json

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.events import (
    DispatchEnd,
    Event,
    IterationStart,
    Log,
    MessageStored,
    ToolCallStored,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel


@tool
def multiply(a: int, b: int) -> str:
    """Multiply two integers."""
    return str(a * b)


def call(call_id: str, name: str, **args: object) -> ProposedToolCall:
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(args))


SCRIPT = [
    ModelResponse(
        text="Let me compute that.",
        tool_calls=[call("c1", "multiply", a=6, b=7), call("c2", "multiply", a="six", b=7)],
    ),
    ModelResponse(tool_calls=[call("c3", "multiply", a=6, b=8)]),
    ModelResponse(text="6 x 7 = 42 and 6 x 8 = 48."),
]


async def count_calls(ctx: DispatchContext, call_next: CallNext) -> None:
    """Dispatch output middleware: tally completed and failed calls in the stash."""
    for stored in ctx.new_tool_calls:
        outcome = "failed" if stored.is_error else "completed"
        ctx.stash.update(f"counts.{outcome}", lambda n: n + 1, default=0)
    ctx.log.info("counter", f"iteration {ctx.iteration}: {len(ctx.new_tool_calls)} call(s)")
    await call_next()


def describe(event: Event) -> str:
    """One line per event."""
    name = type(event).__name__
    if isinstance(event, TurnStart):
        return f"{name} input={event.input!r}"
    if isinstance(event, IterationStart):
        return f"{name} #{event.iteration}"
    if isinstance(event, MessageStored):
        return f"{name} {event.message.role}: {event.message.content!r}"
    if isinstance(event, ToolExecutionStart):
        return f"{name} {event.tool_name}"
    if isinstance(event, ToolExecutionEnd):
        return f"{name} {event.tool_name} error={event.is_error}"
    if isinstance(event, ToolCallStored):
        return f"{name} {event.call.id} {event.call.tool} error={event.call.is_error}"
    if isinstance(event, Log):
        return f"{name} [{event.level}] {event.kind}: {event.message}"
    if isinstance(event, DispatchEnd):
        return f"{name} status={event.status} iterations={event.iterations}"
    if isinstance(event, TurnEnd):
        return f"{name} status={event.status}"
    return name


def main() -> None:
    model = ScriptedModel(SCRIPT)
    counting = Middleware("counting")
    counting.dispatch_output(count_calls)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[multiply],
        middleware=[counting],
        system_prompt="You are a careful calculator.",
    )
    runner.on_any(lambda event: print("  " + describe(event)))

    print("event trace:")
    result = runner.run_sync("What are 6 x 7 and 6 x 8?")

    print(f"status: {result.status}, iterations: {result.iterations}")
    print(f"output: {result.output}")
    print(f"counts: {result.stash['counts']}")
    for stored in result.tool_calls:
        print(f"call {stored.id}: {stored.tool}({dict(stored.args)}) error={stored.is_error}")
    # what the model saw of the failed call on its second request:
    failed = [c for c in model.requests[1].tool_calls if c.is_error]
    print(f"the model was shown {len(failed)} error call(s) on iteration 1")
    result.raise_for_status()


if __name__ == "__main__":
    main()
