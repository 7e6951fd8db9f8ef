"""Concurrent turns on one runner are isolated: registry, stash, calls, baseline."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from middleware import Middleware
from pipeline import DispatchContext, Stash, Tool, TurnContext, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.models import Message
from pipeline.stages import CallNext


class NoArgs(BaseModel):
    """No arguments."""


def local_tool(n: int) -> Tool[NoArgs]:
    def handler(args: NoArgs, ctx: DispatchContext, meta: Stash) -> str:
        return f"local {n}"

    return Tool(
        name=f"local_{n}", description="A turn-local tool.", input_schema=NoArgs, handler=handler
    )


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


TURNS = 200


async def test_two_hundred_concurrent_turns_see_only_their_own_tools_stash_and_calls() -> None:
    """200 concurrent run() calls each register a tool and write stash keys; none leak."""

    async def register_local(ctx: TurnContext, call_next: CallNext) -> None:
        n: int = ctx.stash.get("n")
        ctx.tools.register(local_tool(n))
        ctx.stash.set(f"own.t{n}", n)
        await asyncio.sleep(0)  # let the other turns interleave
        await call_next()

    async def executor(ctx: DispatchContext) -> None:
        n: int = ctx.stash.get("n")
        await asyncio.sleep(0)
        names = [t.name for t in ctx.tools.all()]
        ctx.stash.set("seen_tools", names)
        local = ctx.tools.get(f"local_{n}")
        assert local is not None
        output = await local.bind(ctx)({})
        assert isinstance(output, str)
        await ctx.store_tool_call(
            ToolCall.completed(id=f"call_{n}", tool=local.name, args={}, results=output)
        )
        await asyncio.sleep(0)
        ctx.stash.set("seen_calls", [c.id for c in ctx.turn_tool_calls])
        await ctx.store_message(Message(role="assistant", content=f"turn {n}"))
        ctx.ack()

    plain = Middleware("plain")
    plain.turn_input(register_local)
    runner = TurnRunner(executor=executor, tools=[echo, add], middleware=[plain])
    results = await asyncio.gather(*(runner.run(f"q{n}", stash={"n": n}) for n in range(TURNS)))
    assert len({r.turn_id for r in results}) == TURNS
    for n, result in enumerate(results):
        assert result.status == "completed"
        assert result.output == f"turn {n}"
        assert result.stash == {
            "n": n,
            "own": {f"t{n}": n},
            "seen_tools": ["echo", "add", f"local_{n}"],
            "seen_calls": [f"call_{n}"],
        }
        assert [c.id for c in result.tool_calls] == [f"call_{n}"]
    assert [t.name for t in runner.tools.all()] == ["echo", "add"]
    assert runner.tools.hidden() == []


ops = st.lists(
    st.sampled_from(["register_local", "unregister_echo", "hide_add", "unhide_add", "yield"]),
    max_size=6,
)


@settings(max_examples=25, deadline=None)
@given(plans=st.lists(ops, min_size=1, max_size=8))
def test_random_registry_edits_in_concurrent_turns_stay_in_their_turn(
    plans: list[list[str]],
) -> None:
    """Random interleaved registry edits in concurrent turns match a per-turn model only."""

    async def editing(ctx: TurnContext, call_next: CallNext) -> None:
        n: int = ctx.stash.get("n")
        names = ["echo", "add"]
        hidden: set[str] = set()
        for op in plans[n]:
            if op == "register_local" and f"local_{n}" not in names:
                ctx.tools.register(local_tool(n))
                names.append(f"local_{n}")
            elif op == "unregister_echo":
                ctx.tools.unregister("echo")
                if "echo" in names:
                    names.remove("echo")
            elif op == "hide_add":
                ctx.tools.hide("add")
                hidden.add("add")
            elif op == "unhide_add":
                ctx.tools.unhide("add")
                hidden.discard("add")
            await asyncio.sleep(0)
        ctx.stash.set("expected", {"all": names, "visible": [x for x in names if x not in hidden]})
        await call_next()

    async def executor(ctx: DispatchContext) -> None:
        await asyncio.sleep(0)
        ctx.stash.set(
            "seen",
            {
                "all": [t.name for t in ctx.tools.all()],
                "visible": [t.name for t in ctx.tools.visible()],
            },
        )
        ctx.ack()

    plain = Middleware("plain")
    plain.turn_input(editing)
    runner = TurnRunner(executor=executor, tools=[echo, add], middleware=[plain])

    async def main() -> None:
        results = await asyncio.gather(
            *(runner.run("go", stash={"n": n}) for n in range(len(plans)))
        )
        for result in results:
            assert result.status == "completed"
            assert result.stash["seen"] == result.stash["expected"]

    asyncio.run(main())
    assert [t.name for t in runner.tools.all()] == ["echo", "add"]
    assert [t.name for t in runner.tools.visible()] == ["echo", "add"]
