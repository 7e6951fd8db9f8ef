"""The `tool_call` stage: an onion around each single tool execution, on the exact call.

Every test counts how many times the handler really ran: a decision taken before
``call_next()`` must mean the handler never runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from middleware import Middleware, tool_call
from pipeline import DispatchContext, Gate, Tool, ToolLoopExecutor, TurnRunner, tool_call_checksum
from pipeline.calls import Decision, ToolCallContext, ToolCallNext
from pipeline.events import ErrorReported
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel


class RefundArgs(BaseModel):
    order: str
    cents: int = 100_000


class Refunds:
    """A refund tool that counts its handler runs and what it ran with."""

    def __init__(self) -> None:
        self.ran: list[RefundArgs] = []

    def tool(self, name: str = "refund") -> Tool[RefundArgs]:
        def handler(args: RefundArgs, ctx: DispatchContext, meta: Any) -> str:
            self.ran.append(args)
            return f"refunded {args.cents} on {args.order}"

        return Tool(
            name=name, description="Refund an order.", input_schema=RefundArgs, handler=handler
        )


def calls(*items: tuple[str, str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        tool_calls=[ProposedToolCall(id=i, name=n, arguments=json.dumps(a)) for i, n, a in items]
    )


def runner(
    steps: Sequence[ModelResponse],
    tools: Sequence[Tool[Any]],
    mw: Middleware,
    *,
    parallel: bool = False,
) -> TurnRunner:
    model = ScriptedModel([*steps, ModelResponse(text="done")])
    return TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel),
        tools=tools,
        middleware=[mw],
    )


async def test_a_hook_that_denies_stops_the_handler_and_the_model_reads_why() -> None:
    """`ctx.deny(reason)` before call_next: an error call with the reason, no handler run."""
    refunds = Refunds()
    mw = Middleware("guard")

    @mw.tool_call
    async def no_big_refunds(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        if ctx.args.cents > 500:
            ctx.deny(f"refunds over 500 cents need a human (asked {ctx.args.cents})")
            return
        await call_next()

    result = await runner(
        [calls(("c1", "refund", {"order": "A", "cents": 200}), ("c2", "refund", {"order": "B"}))],
        [refunds.tool()],
        mw,
    ).run("refund")
    ok, denied = result.tool_calls
    assert [a.order for a in refunds.ran] == ["A"]
    assert (ok.is_error, ok.ran, ok.verdict, ok.decisions) == (False, True, "allowed", ())
    assert (denied.is_error, denied.ran, denied.verdict) == (True, False, "denied")
    assert denied.results == (
        "Error: E_CALL_DENIED: guard.no_big_refunds denied the call to 'refund': refunds over "
        "500 cents need a human (asked 100000); it was not run"
    )
    assert denied.decisions == (
        Decision(
            policy="guard.no_big_refunds",
            action="denied",
            reason="refunds over 500 cents need a human (asked 100000)",
            when="before",
        ),
    )


async def test_the_hook_sees_validated_arguments_with_defaults_and_the_raw_ones() -> None:
    """`args` are what the handler will receive (defaults applied); `raw_args` what was sent."""
    refunds = Refunds()
    seen: list[tuple[Any, Any, str, str]] = []
    mw = Middleware("look")

    @mw.tool_call
    def look(ctx: ToolCallContext) -> None:
        seen.append((ctx.args, dict(ctx.raw_args), ctx.call_id, ctx.tool_name))

    await runner([calls(("c1", "refund", {"order": "A"}))], [refunds.tool()], mw).run("go")
    assert seen == [(RefundArgs(order="A", cents=100_000), {"order": "A"}, "c1", "refund")]
    assert refunds.ran == [RefundArgs(order="A", cents=100_000)]


async def test_respond_answers_from_a_cache_without_running_the_handler() -> None:
    """`ctx.respond(output)` before call_next: the handler never runs, the output is the result."""
    refunds = Refunds()
    mw = Middleware("cache")

    @mw.tool_call
    async def cached(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        if ctx.args.order == "cached":
            ctx.respond("refunded earlier")
            return
        await call_next()

    result = await runner(
        [calls(("c1", "refund", {"order": "cached"}), ("c2", "refund", {"order": "new"}))],
        [refunds.tool()],
        mw,
    ).run("go")
    first, second = result.tool_calls
    assert [a.order for a in refunds.ran] == ["new"]
    assert first.inline
    assert not first.is_error
    assert first.results == "refunded earlier"
    assert second.results == "refunded 100000 on new"


async def test_replaced_arguments_are_validated_again_and_the_record_keeps_the_ask() -> None:
    """`replace_args` re-validates; the handler gets the new ones; the record what was asked."""
    refunds = Refunds()
    mw = Middleware("cap")

    @mw.tool_call
    async def cap(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.replace_args({**ctx.raw_args, "cents": min(ctx.args.cents, 500)})
        await call_next()

    result = await runner([calls(("c1", "refund", {"order": "A"}))], [refunds.tool()], mw).run("x")
    assert refunds.ran == [RefundArgs(order="A", cents=500)]
    (record,) = result.tool_calls
    assert dict(record.args) == {"order": "A"}


async def test_replacing_with_invalid_arguments_makes_an_error_call() -> None:
    """Arguments a hook replaces with something the schema refuses: an error call, no run."""
    refunds = Refunds()
    mw = Middleware("bad")

    @mw.tool_call
    async def bad(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.replace_args({"order": 5})
        await call_next()

    result = await runner([calls(("c1", "refund", {"order": "A"}))], [refunds.tool()], mw).run("x")
    assert refunds.ran == []
    assert result.status == "completed"
    assert result.tool_calls[0].is_error
    assert "E_INVALID_TOOL_ARGS" in str(result.tool_calls[0].results)


async def test_an_outcome_replaced_after_the_handler_ran() -> None:
    """`respond` or `deny` after call_next replace what the model reads (the handler ran)."""
    refunds = Refunds()
    mw = Middleware("redact")

    @mw.tool_call
    async def redact(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        await call_next()
        assert ctx.ran
        assert ctx.output == f"refunded 100000 on {ctx.args.order}"
        if ctx.args.order == "secret":
            ctx.deny("the result is classified", policy="redact")
        else:
            ctx.respond("[redacted]")

    result = await runner(
        [calls(("c1", "refund", {"order": "open"}), ("c2", "refund", {"order": "secret"}))],
        [refunds.tool()],
        mw,
    ).run("x")
    assert len(refunds.ran) == 2
    first, second = result.tool_calls
    assert (first.results, first.ran, first.verdict) == ("[redacted]", True, "answered")
    assert first.decisions == (
        Decision(
            policy="redact.redact", action="answered", reason="answered by middleware", when="after"
        ),
    )
    assert (second.is_error, second.ran, second.verdict) == (True, True, "denied")
    assert second.results == (
        "Error: E_CALL_DENIED: redact denied the call to 'refund': the result is classified; "
        "it ran, but its result is withheld"
    )
    assert second.decisions[-1].when == "after"


async def test_a_raising_hook_makes_that_call_an_error_and_the_turn_goes_on() -> None:
    """A hook that raises: that call is an error call (reported), the others run."""
    refunds = Refunds()
    mw = Middleware("flaky")

    @mw.tool_call
    async def flaky(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        if ctx.call_id == "c1":
            raise RuntimeError("policy service down")
        await call_next()

    reported: list[ErrorReported] = []
    r = runner(
        [calls(("c1", "refund", {"order": "A"}), ("c2", "refund", {"order": "B"}))],
        [refunds.tool()],
        mw,
    )
    r.on(ErrorReported, reported.append)
    result = await r.run("x")
    assert result.status == "completed"
    assert [a.order for a in refunds.ran] == ["B"]
    first = result.tool_calls[0]
    assert first.is_error
    assert "policy service down" in str(first.results)
    assert [e.stage for e in reported] == ["tool_call"]


async def test_a_hook_cannot_swap_the_tool_whose_handler_runs() -> None:
    """``ctx.tool`` is read-only: a hook that tries to run another tool's handler fails the
    call; neither handler runs, and the record names the tool the model called."""
    refunds, other = Refunds(), Refunds()
    mw = Middleware("swapper")

    @mw.tool_call
    async def swap(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        assert ctx.tool_name == ctx.tool.name == "lookup"
        ctx.tool = other.tool("refund")  # type: ignore[misc]  # the property has no setter
        await call_next()

    r = runner([calls(("c1", "lookup", {"order": "A"}))], [refunds.tool("lookup")], mw)
    result = await r.run("x")
    assert (refunds.ran, other.ran) == ([], [])
    (record,) = result.tool_calls
    assert (record.tool, record.ran, record.is_error) == ("lookup", False, True)
    assert "swapper" in str(record.results)


async def test_a_hook_that_returns_without_deciding_is_an_error_call() -> None:
    """Neither call_next, deny nor respond: the handler never runs and the model is told."""
    refunds = Refunds()
    mw = Middleware("lazy")

    @mw.tool_call
    async def lazy(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        return None

    result = await runner([calls(("c1", "refund", {"order": "A"}))], [refunds.tool()], mw).run("x")
    assert refunds.ran == []
    assert "E_PIPELINE_SHORT_CIRCUITED" in str(result.tool_calls[0].results)


async def test_layers_nest_and_an_inner_denial_stops_the_handler() -> None:
    """Outer layers see what an inner layer decided; the handler never runs."""
    refunds = Refunds()
    trail: list[str] = []
    mw = Middleware("layers")

    @mw.tool_call(order=-1)
    async def outer(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        trail.append("outer in")
        await call_next()
        trail.append(f"outer out: ran={ctx.ran} error={ctx.is_error} {ctx.denied}")

    @mw.tool_call
    async def inner(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        trail.append("inner")
        ctx.deny("no")

    result = await runner([calls(("c1", "refund", {"order": "A"}))], [refunds.tool()], mw).run("x")
    assert refunds.ran == []
    assert trail == [
        "outer in",
        "inner",
        "outer out: ran=False error=True E_CALL_DENIED: layers.inner denied the call to "
        "'refund': no; it was not run",
    ]
    assert [(d.policy, d.action) for d in result.tool_calls[0].decisions] == [
        ("layers.inner", "denied")
    ]


async def test_tools_globs_limit_a_hook_to_matching_calls() -> None:
    """`tools=` globs: the hook runs only around calls to matching tools."""
    refunds = Refunds()
    seen: list[str] = []
    mw = Middleware("only")

    @mw.tool_call(tools=["refund_*"])
    def only(ctx: ToolCallContext) -> None:
        seen.append(ctx.tool_name)

    await runner(
        [calls(("c1", "refund", {"order": "A"}), ("c2", "refund_eu", {"order": "B"}))],
        [refunds.tool(), refunds.tool("refund_eu")],
        mw,
    ).run("x")
    assert seen == ["refund_eu"]
    assert len(refunds.ran) == 2


async def test_a_hook_can_time_the_handler() -> None:
    """A timing layer measures the handler by wrapping call_next."""
    durations: list[float] = []

    async def slow(args: RefundArgs, ctx: DispatchContext, meta: Any) -> str:
        await asyncio.sleep(0.01)
        return "ok"

    mw = Middleware("timer")

    @mw.tool_call
    async def timer(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        start = time.perf_counter()
        await call_next()
        durations.append(time.perf_counter() - start)

    tool = Tool(name="slow", description="Slow.", input_schema=RefundArgs, handler=slow)
    await runner([calls(("c1", "slow", {"order": "A"}))], [tool], mw).run("x")
    assert len(durations) == 1
    assert durations[0] >= 0.009


async def test_a_hook_can_wait_on_a_gate_per_call_id() -> None:
    """Two identical calls in one batch: each waits on its own gate; one approved, one not."""
    refunds = Refunds()
    mw = Middleware("gate")

    @mw.tool_call
    async def approve(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        gate: Gate[bool] = Gate(id=ctx.call_id, reason="approve?", payload={}, schema=bool)
        if await ctx.wait_for(gate):
            await call_next()
        else:
            ctx.deny("rejected by a human")

    r = runner(
        [calls(("c1", "refund", {"order": "A"}), ("c2", "refund", {"order": "A"}))],
        [refunds.tool()],
        mw,
        parallel=True,
    )
    from pipeline.events import GateOpened

    r.on(GateOpened, lambda e: e.gate.resolve(e.gate.id == "c2"))
    result = await r.run("x")
    first, second = result.tool_calls
    assert first.checksum == second.checksum
    assert (first.is_error, second.is_error) == (True, False)
    assert len(refunds.ran) == 1


class CountingPolicy:
    """A class-based tool_call middleware registered with the module-level decorator."""

    @tool_call(order=-5)
    async def count(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.stash.increment("seen")
        await call_next()


async def test_class_based_tool_call_middleware_and_describe_pipelines() -> None:
    """The module-level `tool_call` decorator registers methods; describe shows the stage."""
    refunds = Refunds()
    model = ScriptedModel([calls(("c1", "refund", {"order": "A"})), ModelResponse(text="ok")])
    r = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[refunds.tool()], middleware=[CountingPolicy()]
    )
    assert r.describe_pipelines()["tool_call"] == ["CountingPolicy.count"]
    result = await r.run("x")
    assert result.stash["seen"] == 1


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
async def test_the_stage_runs_for_every_call_of_a_batch(parallel: bool) -> None:
    """Sequential or parallel, each call of a batch passes through the stage on its own id."""
    refunds = Refunds()
    seen: list[str] = []
    mw = Middleware("all")

    @mw.tool_call
    def each(ctx: ToolCallContext) -> None:
        seen.append(ctx.call_id)

    await runner(
        [calls(*((f"c{i}", "refund", {"order": str(i)}) for i in range(5)))],
        [refunds.tool()],
        mw,
        parallel=parallel,
    ).run("x")
    assert sorted(seen) == [f"c{i}" for i in range(5)]


class Lookup(BaseModel):
    q: str
    limit: int = 10
    exact: bool = False


@settings(max_examples=200, deadline=None)
@given(
    q=st.text(max_size=8),
    limit=st.none() | st.integers(-5, 50),
    exact=st.none() | st.booleans(),
)
def test_the_validated_checksum_is_the_checksum_of_the_validated_arguments(
    q: str, limit: int | None, exact: bool | None
) -> None:
    """However the model spells the defaults (or omits them), `validated_checksum` is the
    checksum of the arguments the handler receives, defaults applied."""
    seen: list[tuple[str, str, str]] = []
    mw = Middleware("look")

    @mw.tool_call
    def look(ctx: ToolCallContext) -> None:
        seen.append((ctx.validated_checksum, ctx.checksum, json.dumps(ctx.validated_args)))

    def handler(args: Lookup, ctx: DispatchContext, meta: Any) -> str:
        return "ok"

    lookup = Tool(name="lookup", description="Look up.", input_schema=Lookup, handler=handler)
    args: dict[str, Any] = {"q": q}
    if limit is not None:
        args["limit"] = limit
    if exact is not None:
        args["exact"] = exact
    result = runner([calls(("c1", "lookup", args))], [lookup], mw).run_sync("x")
    [(vchecksum, checksum, validated)] = seen
    full = {"q": q, "limit": 10 if limit is None else limit, "exact": bool(exact)}
    assert json.loads(validated) == full
    assert vchecksum == tool_call_checksum("lookup", full)
    assert result.tool_calls[0].validated_checksum == vchecksum
    assert (checksum == vchecksum) == (args == full)
