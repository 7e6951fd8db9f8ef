"""Middleware stacks for replaying the sample transcripts in this folder, and a runner.

Used by ``tests/cli`` as ``loopware replay ... --middleware tests.data.replay_stacks:NAME``; each
attribute is a zero-argument factory, as ``--middleware`` accepts.
"""

from __future__ import annotations

from middleware import (
    ApprovalGate,
    IterationBudget,
    Middleware,
    RepetitionDetector,
    ToolCallLimit,
    ToolPolicy,
)
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCallContext, ToolCallNext
from pipeline.models import ModelResponse
from pipeline.testing import ScriptedModel

NOT_MIDDLEWARE = 42
"""Something that is neither middleware nor a factory (for the exit status 4 tests)."""


def coding_stack() -> list[object]:
    """Hide a tool once an identical call has been made three times."""
    return [RepetitionDetector(threshold=3, on_repeat="hide")]


def hiding_shell_repeats() -> list[object]:
    """Hide a tool after three identical calls, even one the executor refuses (unknown)."""
    return [RepetitionDetector(threshold=3, on_repeat="hide")]


def support_stack() -> list[object]:
    """Never offer shell tools; end the turn on a second refund."""
    return [ToolPolicy(deny=["shell*"]), ToolCallLimit({"issue_refund": 1}, on_exceed="nack")]


def research_stack() -> list[object]:
    """Catch repeats and A-B-A-B oscillation; cap searches and fetches."""
    return [
        RepetitionDetector(threshold=3, window=6),
        ToolCallLimit({"web_search": 4, "fetch_url": 4}, total=10),
    ]


shell_watch = Middleware("shell_watch")
"""A custom set that lets every call to a ``shell*`` tool run with a ``warned`` decision of its
own (policy ``watch.shell``), so replay must read a custom middleware's decisions from the
records, as it does the built-ins'."""


@shell_watch.tool_call
async def flag_shell(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
    """Warn about a shell call, then let it run."""
    if ctx.tool_name.startswith("shell"):
        ctx.warn("shell access from a support agent", policy="watch.shell")
    await call_next()


def needs_arguments(threshold: int) -> RepetitionDetector:
    """A factory that cannot be called without arguments (for the exit status 4 tests)."""
    return RepetitionDetector(threshold=threshold)


def broken_factory() -> list[object]:
    """A factory that raises (for the exit status 4 tests)."""
    raise RuntimeError("the policy service is down")


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up by id."""
    return f"order {order_id}: delivered"


def support_runner() -> TurnRunner:
    """A support runner with the support stack (for ``loopware pipelines``)."""
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([ModelResponse(text="Hello!")])),
        tools=[lookup_order],
        middleware=support_stack(),
    )


def rejecting_approval() -> list[object]:
    """An approval gate on refunds whose approver says no to every call."""
    return [ApprovalGate(["issue_refund"], approver=lambda gate: False)]


def two_iterations() -> list[object]:
    """End every turn once it has run two iterations."""
    return [IterationBudget(2)]


def per_turn_refund_limit() -> list[object]:
    """One call of each tool per turn; a second one ends the turn."""
    return [ToolCallLimit({"search": 1}, on_exceed="nack")]


def oscillation() -> list[object]:
    """Catch an A-B-A-B alternation among the last four calls."""
    return [RepetitionDetector(threshold=10, window=4)]


def warned_then_approved() -> list[object]:
    """Warn about a repeated call, and approve every shell call."""
    return [
        RepetitionDetector(threshold=2, on_repeat="warn"),
        ApprovalGate(["shell*"], approver=lambda gate: True),
    ]


def warned_then_rejected() -> list[object]:
    """Warn about a repeated call, and reject every shell call."""
    return [
        RepetitionDetector(threshold=2, on_repeat="warn"),
        ApprovalGate(["shell*"], approver=lambda gate: False),
    ]
