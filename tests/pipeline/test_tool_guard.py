"""`Tool.with_guard`: a check that runs after validation and before the handler."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline import (
    DispatchContext,
    Event,
    InvalidToolArgsError,
    InvalidToolError,
    PolicyViolationError,
    Stash,
    Tool,
    ToolDownstreamError,
    ToolExecutionEnd,
    ToolExecutionStart,
)


class Args(BaseModel):
    path: str
    force: bool = False


class FakeContext:
    """A minimal ToolContext that records events."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    @property
    def turn_id(self) -> str:
        return "turn-1"

    def emit(self, event: Event) -> None:
        self.events.append(event)


def make_tool(handled: list[Args]) -> Tool[Args]:
    def delete(args: Args, ctx: DispatchContext, meta: Stash) -> str:
        handled.append(args)
        return f"deleted {args.path}"

    return Tool(name="delete", description="Delete a file.", input_schema=Args, handler=delete,
                trusted=True, meta={"risk": "high"})


async def test_guard_sees_raw_args_then_the_handler_runs() -> None:
    """A passing guard receives the raw arguments and context; then the handler runs normally."""
    handled: list[Args] = []
    seen: list[tuple[dict[str, Any], object, int]] = []
    ctx = FakeContext()

    async def guard(args: Mapping[str, Any], guard_ctx: DispatchContext) -> None:
        seen.append((dict(args), guard_ctx, len(ctx.events)))

    guarded = make_tool(handled).with_guard(guard)
    assert await guarded.executor(ctx)({"path": "/tmp/x"}) == "deleted /tmp/x"
    assert seen == [({"path": "/tmp/x"}, ctx, 0)]  # before ToolExecutionStart
    assert [type(e) for e in ctx.events] == [ToolExecutionStart, ToolExecutionEnd]
    assert handled == [Args(path="/tmp/x")]


async def test_guard_error_stops_the_call_before_any_event() -> None:
    """A LoopError from the guard propagates unchanged; no events, handler never runs."""
    handled: list[Args] = []
    ctx = FakeContext()
    refusal = PolicyViolationError("not approved", policy="approval")

    async def refuse(args: Mapping[str, Any], guard_ctx: DispatchContext) -> None:
        raise refusal

    guarded = make_tool(handled).with_guard(refuse)
    with pytest.raises(PolicyViolationError) as info:
        await guarded.executor(ctx)({"path": "/"})
    assert info.value is refusal
    assert ctx.events == []
    assert handled == []


async def test_other_guard_exceptions_become_downstream_errors() -> None:
    """A non-loopware exception from a guard is wrapped in ToolDownstreamError and chained."""
    ctx = FakeContext()

    async def broken(args: Mapping[str, Any], guard_ctx: DispatchContext) -> None:
        raise KeyError("approver")

    guarded = make_tool([]).with_guard(broken)
    with pytest.raises(ToolDownstreamError, match="guard failed") as info:
        await guarded.executor(ctx)({"path": "/"})
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.tool_name == "delete"


async def test_guard_does_not_run_for_invalid_arguments() -> None:
    """Validation comes first: invalid arguments fail without calling the guard."""
    calls: list[object] = []

    async def guard(args: Mapping[str, Any], guard_ctx: DispatchContext) -> None:
        calls.append(args)

    guarded = make_tool([]).with_guard(guard)
    with pytest.raises(InvalidToolArgsError):
        await guarded.executor(FakeContext())({"path": 3})
    assert calls == []


async def test_guards_stack_in_order_and_the_original_is_untouched() -> None:
    """Guards added later run later; the original tool keeps running without any guard."""
    order: list[str] = []

    def named(label: str) -> Any:
        async def guard(args: Mapping[str, Any], guard_ctx: DispatchContext) -> None:
            order.append(label)

        return guard

    original = make_tool([])
    twice = original.with_guard(named("first")).with_guard(named("second"))
    await twice.executor(FakeContext())({"path": "a"})
    assert order == ["first", "second"]
    await original.executor(FakeContext())({"path": "a"})
    assert order == ["first", "second"]
    assert (twice.name, twice.description, twice.input_schema, twice.trusted) == (
        original.name, original.description, original.input_schema, original.trusted
    )
    assert twice.meta.all() == {"risk": "high"}
    assert twice.describe() == original.describe()
    assert type(twice) is Tool


def test_a_guard_that_is_not_callable_is_refused() -> None:
    """with_guard rejects a non-callable with InvalidToolError naming the field."""
    with pytest.raises(InvalidToolError, match="guard"):
        make_tool([]).with_guard("approve")  # type: ignore[arg-type]
