"""Typing tests for the ``tool_call`` stage (checked by mypy, never run by pytest).

Lines that must be rejected carry ``# type: ignore[<code>]`` with the exact code mypy reports;
with ``warn_unused_ignores`` the build fails if a rejection ever disappears. Everything else must
type-check cleanly.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, assert_type

from middleware import (
    ApprovalGate,
    Middleware,
    ToolCallHook,
    ToolCallLimit,
    ToolCallMiddleware,
    ToolPolicy,
    tool_call,
)
from pipeline import DispatchContext, Gate, TurnContext, TurnRunner
from pipeline.calls import Decision, ToolCall, ToolCallContext, ToolCallNext, Verdict
from pipeline.errors import LoopError
from pipeline.stages import CallNext

guard = Middleware("guard")

# -- accepted shapes --------------------------------------------------------------------------


# a middleware on a set: call_next runs the handler; the context then tells what happened
@guard.tool_call
async def no_big_refunds(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
    if ctx.tool_name == "refund" and ctx.args.cents > 5_000:
        ctx.deny("refunds over 5000 cents need a human", policy="refunds")
        return
    assert_type(await call_next(), None)
    assert_type(ctx.ran, bool)
    assert_type(ctx.error, LoopError | None)
    assert_type(ctx.decisions, tuple[Decision, ...])
    if ctx.is_error:
        ctx.respond("the refund service is down; try again later")


# a sync hook with options, filtered by tool globs
@guard.tool_call(order=-10, name="log-shell", tools=["shell*"], timed=True)
def log_shell(ctx: ToolCallContext) -> None:
    ctx.log.info("shell", f"{ctx.call_id}: {dict(ctx.raw_args)}")


# an async hook that waits on a gate per call id
@guard.tool_call(tools=("deploy",))
async def hold_deploys(ctx: ToolCallContext) -> None:
    approved = await ctx.wait_for(Gate[bool](id=ctx.call_id, reason="deploy"))
    assert_type(approved, bool)
    if not approved:
        ctx.deny("not approved", action="rejected", message="a human said no")


# the decorators return the function with its own type
def use_decorated(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
    assert_type(no_big_refunds(ctx, call_next), Coroutine[Any, Any, None]).close()
    assert_type(log_shell(ctx), None)
    assert_type(hold_deploys(ctx), Coroutine[Any, Any, None]).close()


# the stage Protocols accept matching functions
as_middleware: ToolCallMiddleware = no_big_refunds
as_hook: ToolCallHook = log_shell


def read_the_record(record: ToolCall) -> None:
    assert_type(record.ran, bool)
    assert_type(record.verdict, Verdict)
    assert_type(record.deciding, Decision | None)
    assert_type(record.duration_ms, float | None)


class Sandbox:
    """A class-based ``tool_call`` middleware; the module-level decorator sees ``self`` first."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    @tool_call(order=-120, tools=["fs_*"])
    async def confine(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        if str(ctx.raw_args.get("path", "")).split("/")[0] not in self.allowed:
            ctx.deny("outside the sandbox")
            return
        await call_next()

    @tool_call
    def note(self, ctx: ToolCallContext) -> None:
        ctx.stash.increment("sandbox.seen")


runner_items: list[object] = [
    guard,
    Sandbox(frozenset({"tmp"})),
    ToolPolicy(deny=["shell*"]),
    ToolCallLimit({"search": 3}),
    ApprovalGate(["refund*"]),
]


async def executor(ctx: DispatchContext) -> None:
    ctx.ack()


TurnRunner(executor=executor, middleware=runner_items)

# -- rejected at the decorator line -----------------------------------------------------------


# a dispatch-shaped middleware on tool_call (bare form: no overload matches)
@guard.tool_call  # type: ignore[call-overload]
async def dispatch_on_tool_call(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


# ... with options (keyword form: the type variable's bound fails)
@guard.tool_call(order=1)  # type: ignore[type-var]
async def dispatch_on_tool_call_keyword(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


# a one-argument dispatch hook, and a turn hook
@guard.tool_call(tools=["search"])  # type: ignore[type-var]
def dispatch_hook_on_tool_call(ctx: DispatchContext) -> None:
    return None


@guard.tool_call  # type: ignore[call-overload]
def turn_hook_on_tool_call(ctx: TurnContext) -> None:
    return None


# a two-argument sync function (it cannot await call_next)
@guard.tool_call  # type: ignore[call-overload]
def sync_two(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
    return None


# a tool_call middleware on a dispatch stage
@guard.dispatch_input  # type: ignore[call-overload]
async def tool_call_on_dispatch(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
    await call_next()


# the module-level decorator rejects a dispatch-shaped method just the same
class Broken:
    @tool_call  # type: ignore[call-overload]
    async def dispatch_method(self, ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    @tool_call(tools=["search"])  # type: ignore[type-var]
    def dispatch_hook_method(self, ctx: DispatchContext) -> None:
        return None


# -- rejected inside a hook: what the policies judged cannot be swapped ----------------------


@guard.tool_call
async def swaps_the_tool(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
    ctx.tool = ctx.tool  # type: ignore[misc]
    ctx.tool_name = "search"  # type: ignore[misc]
    await call_next()
