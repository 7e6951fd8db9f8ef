"""Typing tests for middleware registration (checked by mypy, never run by pytest).

Lines that must be rejected carry ``# type: ignore[<code>]`` with the exact code mypy reports;
with ``warn_unused_ignores`` the build fails if a rejection ever disappears. Everything else must
type-check cleanly.

Note on "a missing call_next": a one-argument function is a valid *hook*, so what mypy rejects
is a function whose second positional parameter is not a ``CallNext`` (wrong type, or only
keyword), and a function taking no context at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine
from typing import Any, assert_type

from middleware import (
    DispatchHook,
    DispatchMiddleware,
    Middleware,
    RepetitionDetector,
    ToolCallLimit,
    TurnHook,
    TurnMiddleware,
    dispatch_input,
    dispatch_output,
    turn_input,
    turn_output,
)
from pipeline import DispatchContext, StashKey, TurnContext, TurnRunner
from pipeline.stages import CallNext, MethodRegistration

mw = Middleware("checks")

# -- accepted shapes --------------------------------------------------------------------------


@mw.dispatch_output
async def count_calls(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        ctx.stash.update(f"counts.{call.tool}", lambda n: n + 1, default=0)
    await call_next()


@mw.turn_output(order=-10)
def report(ctx: TurnContext) -> None:
    print(ctx.turn_id)


@mw.turn_input(name="greet")
async def greet(ctx: TurnContext) -> None:
    ctx.log.info("greet", "hello")


@mw.dispatch_output(tools=["search"], order=2, timed=True)
def on_search(ctx: DispatchContext) -> None:
    ctx.tools.hide("search")


@mw.dispatch_input()
async def before_model(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


# the decorators return the function with its own type
def use_decorated(ctx: DispatchContext, turn: TurnContext, call_next: CallNext) -> None:
    assert_type(count_calls(ctx, call_next), Coroutine[Any, Any, None]).close()
    assert_type(report(turn), None)
    assert_type(on_search(ctx), None)
    assert_type(Guard.check(Guard(1), ctx), None)
    assert_type(Guard(1).start(turn, call_next), Coroutine[Any, Any, None]).close()


# the stage Protocols accept matching functions


async def two_turn(ctx: TurnContext, call_next: CallNext) -> None:
    await call_next()


as_turn_mw: TurnMiddleware = two_turn
as_turn_hook: TurnHook = report
as_dispatch_mw: DispatchMiddleware = count_calls
as_dispatch_hook: DispatchHook = on_search


def call_as_protocol(ctx: TurnContext, call_next: CallNext) -> Awaitable[None]:
    return as_turn_mw(ctx, call_next)


class Guard:
    """A class-based middleware; the module-level decorators see ``self`` first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    @turn_input(order=-1)
    async def start(self, ctx: TurnContext, call_next: CallNext) -> None:
        await call_next()

    @dispatch_input
    @dispatch_output(name="guard-check")
    def check(self, ctx: DispatchContext) -> None:
        if ctx.iteration > self.limit:
            ctx.abort("too long")

    @turn_output
    async def finish(self, ctx: TurnContext) -> None:
        ctx.log.debug("guard", "done")


registrations: tuple[MethodRegistration, ...] = Guard.__dict__["start"].__loopware_registrations__
runner_items: list[object] = [mw, Guard(3), RepetitionDetector(), ToolCallLimit({"search": 2})]


# -- rejected at the decorator line -----------------------------------------------------------


# a dispatch middleware registered on a turn stage (bare form: no overload matches)
@mw.turn_input  # type: ignore[call-overload]
async def dispatch_on_turn(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


# ... and a turn middleware on a dispatch stage (keyword form: the type variable's bound fails)
@mw.dispatch_output(order=1)  # type: ignore[type-var]
async def turn_on_dispatch(ctx: TurnContext, call_next: CallNext) -> None:
    await call_next()


# a two-argument sync function (it cannot await call_next)
@mw.dispatch_output  # type: ignore[call-overload]
def sync_two(ctx: DispatchContext, call_next: CallNext) -> None:
    return None


@mw.dispatch_input(order=3)  # type: ignore[type-var]
def sync_two_keyword(ctx: DispatchContext, call_next: CallNext) -> None:
    return None


# a second parameter that is not call_next
@mw.dispatch_output  # type: ignore[call-overload]
async def wrong_next(ctx: DispatchContext, limit: int) -> None:
    return None


# call_next only as a keyword: it is passed positionally
@mw.turn_output  # type: ignore[call-overload]
async def keyword_next(ctx: TurnContext, *, call_next: CallNext) -> None:
    await call_next()


# no context at all
@mw.turn_input  # type: ignore[call-overload]
async def no_args() -> None:
    return None


# a wrong return type
@mw.dispatch_output  # type: ignore[call-overload]
async def returns_int(ctx: DispatchContext, call_next: CallNext) -> int:
    await call_next()
    return 1


@mw.turn_output(name="str-hook")  # type: ignore[type-var]
def hook_returns_str(ctx: TurnContext) -> str:
    return "done"


# tools= is not an option of turn stages (nor of dispatch_input)
@mw.turn_input(tools=["search"])  # type: ignore[call-overload, untyped-decorator]
async def filtered_turn(ctx: TurnContext, call_next: CallNext) -> None:
    await call_next()


# module-level decorators reject a wrongly shaped method just the same
class Broken:
    @dispatch_output  # type: ignore[call-overload]
    def sync_method(self, ctx: DispatchContext, call_next: CallNext) -> None:
        return None

    @turn_output(order=1)  # type: ignore[type-var]
    async def dispatch_method(self, ctx: DispatchContext) -> None:
        return None


# a StashKey[int] assigned a str, inside a middleware
COUNT = StashKey[int]("stats.count", default=0)


@mw.dispatch_output(name="stash-typed")
async def typed_stash(ctx: DispatchContext, call_next: CallNext) -> None:
    assert_type(ctx.stash[COUNT], int)
    ctx.stash[COUNT] = ctx.stash[COUNT] + 1
    ctx.stash[COUNT] = "many"  # type: ignore[misc]
    await call_next()


# -- one registration core: plain calls, tools= per stage, and the runner's one way in ----------


# a plain function joins a set with a call; the call is typed like the decorator
async def plain_dispatch(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


registered = mw.dispatch_input(plain_dispatch)
mw.turn_output(plain_dispatch)  # type: ignore[call-overload]


def use_registered(ctx: DispatchContext, call_next: CallNext) -> None:
    assert_type(registered(ctx, call_next), Coroutine[Any, Any, None]).close()


# tools= is an option of dispatch_output only, on sets and on classes alike
@mw.dispatch_input(tools=["search"])  # type: ignore[call-overload, untyped-decorator]
async def filtered_input(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


class Filtered:
    @dispatch_output(tools=["search"], timed=True)
    def on_search(self, ctx: DispatchContext) -> None:
        return None

    @turn_output(tools=["search"])  # type: ignore[call-overload, untyped-decorator]
    def on_turn(self, ctx: TurnContext) -> None:
        return None


# the per-stage keyword arguments of TurnRunner are gone: middleware=[...] is the one way in
async def executor(ctx: DispatchContext) -> None:
    ctx.ack()


TurnRunner(executor=executor, middleware=[mw, Guard(1)])
TurnRunner(executor=executor, dispatch_output=[plain_dispatch])  # type: ignore[call-arg]
