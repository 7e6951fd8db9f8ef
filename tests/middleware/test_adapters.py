"""The adapters: hooks, sync code, tool filters and timing, each with intact introspection."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from middleware import Middleware, dispatch_output, turn_output
from pipeline import DispatchContext, TurnContext
from pipeline.calls import ToolCall
from pipeline.events import Log
from pipeline.stages import CallNext
from pipeline.testing import make_dispatch_context


class Trail:
    """Records what ran, in order, and provides the innermost call_next."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def inner(self) -> None:
        self.events.append("next")


def only_spec(mw: Middleware) -> Any:
    (spec,) = mw.middleware_specs()
    return spec.fn


async def test_a_sync_hook_runs_before_call_next() -> None:
    """`def hook(ctx)` runs, then the adapter awaits call_next."""
    trail = Trail()
    mw = Middleware("h")

    @mw.turn_output
    def report(ctx: TurnContext) -> None:
        """Report the turn."""
        trail.events.append("hook")

    await only_spec(mw)(make_dispatch_context().turn, trail.inner)
    assert trail.events == ["hook", "next"]


async def test_an_async_hook_runs_before_call_next() -> None:
    """`async def hook(ctx)` is awaited, then call_next."""
    trail = Trail()
    mw = Middleware("h")

    @mw.dispatch_input
    async def check(ctx: DispatchContext) -> None:
        trail.events.append(f"hook@{ctx.iteration}")

    await only_spec(mw)(make_dispatch_context(iteration=4), trail.inner)
    assert trail.events == ["hook@4", "next"]


async def test_a_sync_two_argument_function_has_its_awaitable_awaited() -> None:
    """A sync middleware returning ``call_next()``'s awaitable has it awaited."""
    trail = Trail()
    mw = Middleware("h")

    def passthrough(ctx: DispatchContext, call_next: CallNext) -> Awaitable[None]:
        trail.events.append("sync")
        return call_next()

    mw.dispatch_output(passthrough)
    await only_spec(mw)(make_dispatch_context(), trail.inner)
    assert trail.events == ["sync", "next"]


async def test_a_callable_object_with_async_call_is_treated_as_async() -> None:
    """An instance with ``async def __call__(self, ctx)`` is an async hook."""
    trail = Trail()

    class Hook:
        async def __call__(self, ctx: TurnContext) -> None:
            trail.events.append("object")

    mw = Middleware("h")
    mw.turn_input(Hook())
    await only_spec(mw)(make_dispatch_context().turn, trail.inner)
    assert trail.events == ["object", "next"]


def test_adapted_callables_keep_docs_names_and_report_the_async_contract() -> None:
    """wrapt keeps the docstring and name; the signature and coroutine flag are the contract's."""
    mw = Middleware("h")

    @mw.turn_output
    def report(ctx: TurnContext) -> None:
        """Report the turn."""

    fn = only_spec(mw)
    assert fn is not report
    assert fn.__doc__ == "Report the turn."
    assert fn.__name__ == "report"
    assert fn.__wrapped__ is report
    assert inspect.iscoroutinefunction(fn)
    assert list(inspect.signature(fn).parameters) == ["ctx", "call_next"]


def test_bound_adapted_methods_keep_their_introspection() -> None:
    """A sync hook method, bound, still reports the async two-argument contract and its doc."""

    class Reporter:
        @turn_output
        def report(self, ctx: TurnContext) -> None:
            """Report for this instance."""

    (reg,) = Reporter.__dict__["report"].__loopware_registrations__
    fn = reg.bind(Reporter()).fn
    assert inspect.iscoroutinefunction(fn)
    assert fn.__doc__ == "Report for this instance."
    assert list(inspect.signature(fn).parameters) == ["ctx", "call_next"]


def calls_to(*tools: str) -> list[ToolCall]:
    return [
        ToolCall.completed(id=f"c{i}", tool=t, args={}, results="ok") for i, t in enumerate(tools)
    ]


@pytest.mark.parametrize(
    ("tools", "ran"),
    [(("search",), True), (("fetch", "search"), True), (("fetch",), False), ((), False)],
    ids=["match", "match-among-others", "other-tool", "no-calls"],
)
async def test_the_tools_filter_runs_only_for_iterations_with_matching_calls(
    tools: tuple[str, ...], ran: bool
) -> None:
    """`tools=` skips to call_next unless a call of this iteration names a listed tool."""
    trail = Trail()
    mw = Middleware("f")

    @mw.dispatch_output(tools=["search", "lookup"])
    async def on_search(ctx: DispatchContext, call_next: CallNext) -> None:
        """React to searches."""
        trail.events.append("mw")
        await call_next()

    fn = only_spec(mw)
    assert inspect.iscoroutinefunction(fn)
    assert fn.__doc__ == "React to searches."
    await fn(make_dispatch_context(tool_calls=calls_to(*tools)), trail.inner)
    assert trail.events == (["mw", "next"] if ran else ["next"])


async def test_the_tools_filter_composes_with_a_hook() -> None:
    """A filtered one-argument hook runs for matching iterations and always reaches call_next."""
    trail = Trail()
    mw = Middleware("f")

    @mw.dispatch_output(tools=("fetch",))
    def on_fetch(ctx: DispatchContext) -> None:
        trail.events.append("hook")

    fn = only_spec(mw)
    await fn(make_dispatch_context(tool_calls=calls_to("fetch")), trail.inner)
    await fn(make_dispatch_context(tool_calls=calls_to("search")), trail.inner)
    assert trail.events == ["hook", "next", "next"]


async def test_timing_logs_the_middlewares_own_time() -> None:
    """`timed=True` emits a debug Log with the self time (total minus the inner stage)."""
    events: list[Any] = []
    ctx = make_dispatch_context(events=events)
    mw = Middleware("t")

    @mw.dispatch_output(timed=True, name="slowpoke")
    async def slow(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    async def slow_inner() -> None:
        import asyncio

        await asyncio.sleep(0.02)

    await only_spec(mw)(ctx, slow_inner)
    (log,) = [e for e in events if isinstance(e, Log)]
    assert log.kind == "middleware.timing"
    assert log.level == "debug"
    assert log.payload["middleware"] == "slowpoke"
    assert log.payload["stage"] == "dispatch_output"
    assert log.payload["total_ms"] >= 20.0
    assert 0.0 <= log.payload["self_ms"] < 10.0


async def test_a_sets_timed_default_applies_unless_overridden() -> None:
    """`Middleware(name, timed=True)` times every registration except those saying otherwise."""
    events: list[Any] = []
    ctx = make_dispatch_context(events=events)
    mw = Middleware("t", timed=True)

    @mw.dispatch_output
    async def timed_one(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    @mw.dispatch_input(timed=False)
    async def untimed(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    first, second = mw.middleware_specs()
    trail = Trail()
    await first.fn(ctx, trail.inner)
    await second.fn(ctx, trail.inner)
    assert second.fn is untimed
    assert [e.payload["middleware"] for e in events if isinstance(e, Log)] == ["t.timed_one"]


async def test_timing_still_logs_when_the_middleware_raises() -> None:
    """The timing record is emitted even when the timed middleware fails."""
    events: list[Any] = []
    ctx = make_dispatch_context(events=events)

    class Failing:
        @dispatch_output(timed=True)
        async def fail(self, ctx: DispatchContext, call_next: CallNext) -> None:
            raise ValueError("nope")

    (reg,) = Failing.__dict__["fail"].__loopware_registrations__
    with pytest.raises(ValueError, match="nope"):
        await reg.bind(Failing()).fn(ctx, Trail().inner)
    assert [e.payload["middleware"] for e in events if isinstance(e, Log)] == ["Failing.fail"]


@pytest.mark.parametrize("make_fn", ["sync", "async"])
async def test_an_exception_in_a_hook_propagates_and_skips_call_next(make_fn: str) -> None:
    """Hooks fail like any middleware: the error reaches the runner, the rest does not run."""
    trail = Trail()
    mw = Middleware("h")
    fn: Callable[..., Any]
    if make_fn == "sync":

        def fn(ctx: TurnContext) -> None:
            raise KeyError("boom")

    else:

        async def fn(ctx: TurnContext) -> None:
            raise KeyError("boom")

    mw.turn_input(fn)
    with pytest.raises(KeyError):
        await only_spec(mw)(make_dispatch_context().turn, trail.inner)
    assert trail.events == []
