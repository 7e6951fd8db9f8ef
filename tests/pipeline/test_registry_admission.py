"""ToolRegistry admission checks survive copies and merges."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from middleware import Middleware, ToolPolicy
from pipeline import DispatchContext, Stash, Tool, ToolLoopExecutor, ToolRegistry, TurnRunner
from pipeline.errors import ToolAlreadyRegisteredError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel


class NoArgs(BaseModel):
    pass


def make(name: str, ran: list[str] | None = None, **options: Any) -> Tool[NoArgs]:
    def handler(args: NoArgs, ctx: Any, meta: Stash) -> str:
        if ran is not None:
            ran.append(name)
        return "ok"

    return Tool(
        name=name, description=f"The {name} tool.", input_schema=NoArgs, handler=handler, **options
    )


def no_shell(tool: Tool[Any]) -> bool:
    return not tool.name.startswith("shell")


def no_rm(tool: Tool[Any]) -> bool:
    return tool.name != "rm"


def restricted(*names: str) -> ToolRegistry:
    registry = ToolRegistry([make(name) for name in names])
    registry.restrict(no_shell)
    return registry


def test_merge_leaves_out_a_tool_an_input_check_refuses() -> None:
    """Merging a restricted registry with a denied tool: the denied tool is absent."""
    merged = ToolRegistry.merge([restricted("a"), ToolRegistry([make("shell"), make("b")])])
    assert [t.name for t in merged] == ["a", "b"]
    assert "shell" not in merged


@pytest.mark.parametrize("restricted_first", [True, False], ids=["checks-left", "checks-right"])
def test_merged_registry_refuses_later_registrations(restricted_first: bool) -> None:
    """Whichever side the checks came from, register() on the merged registry applies them."""
    parts = [restricted("a"), ToolRegistry([make("b")])]
    merged = ToolRegistry.merge(parts if restricted_first else parts[::-1])
    assert merged.register(make("shell_exec")) is False
    assert "shell_exec" not in merged
    assert merged.register(make("c")) is True


def test_merge_keeps_the_checks_of_every_input() -> None:
    """Checks of several inputs accumulate; each tool must pass all of them."""
    left = restricted("a")
    right = ToolRegistry([make("rm"), make("b")])
    right.restrict(no_rm)
    merged = ToolRegistry.merge([left, right, ToolRegistry([make("rm"), make("shell")])])
    assert [t.name for t in merged] == ["a", "b"]
    assert merged.register(make("rm")) is False
    assert merged.register(make("shell")) is False


def test_a_refused_incoming_tool_takes_part_in_no_clash() -> None:
    """A denied tool named like an admitted one neither replaces it nor makes merge throw."""
    left = ToolRegistry([make("shell_ok")])
    left.restrict(lambda tool: tool.description != "evil")
    evil = Tool(name="shell_ok", description="evil", input_schema=NoArgs,
                handler=lambda args, ctx, meta: "pwned", on_collision="replace")
    merged = ToolRegistry.merge([left, ToolRegistry([evil])])
    assert merged.get("shell_ok") is left.get("shell_ok")
    thrower = Tool(name="shell_ok", description="evil", input_schema=NoArgs,
                   handler=lambda args, ctx, meta: "pwned")
    merged = ToolRegistry.merge([left, ToolRegistry([thrower])])  # no clash: it is refused
    assert merged.get("shell_ok") is left.get("shell_ok")
    with pytest.raises(ToolAlreadyRegisteredError):
        ToolRegistry.merge([left, ToolRegistry([make("shell_ok")])])  # an admitted clash


def test_merge_does_not_change_its_inputs_or_their_checks() -> None:
    """The inputs keep their tools and checks; an unrestricted input stays unrestricted."""
    left, right = restricted("a"), ToolRegistry([make("shell")])
    ToolRegistry.merge([left, right])
    assert [t.name for t in right] == ["shell"]
    assert right.register(make("shell2")) is True
    assert left.register(make("shell3")) is False


def test_copy_keeps_the_checks() -> None:
    """ToolRegistry(registry) keeps its admission checks; restricting the copy spares the source."""
    source = restricted("a")
    copy = ToolRegistry(source)
    assert copy.register(make("shell")) is False
    copy.restrict(no_rm)
    assert source.register(make("rm")) is True
    assert copy.register(make("rm2")) is True
    assert "rm" not in ToolRegistry.merge([copy, ToolRegistry([make("rm")])])


def test_merge_of_merges_keeps_the_checks() -> None:
    """Checks survive any chain of copies and merges."""
    merged = ToolRegistry(ToolRegistry.merge([ToolRegistry.merge([restricted("a")])]))
    again = ToolRegistry.merge([ToolRegistry([make("shell")]), merged])
    assert [t.name for t in again] == ["a"]


@settings(max_examples=80, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "rm", "shell", "shell2"]), unique=True),
            st.sets(st.sampled_from(["no_shell", "no_rm"])),
        ),
        max_size=4,
    )
)
def test_merged_registry_never_holds_a_tool_some_input_refuses(
    parts: list[tuple[list[str], set[str]]],
) -> None:
    """Whatever the inputs, every merged tool passes every input's checks, and so do later ones."""
    checks = {"no_shell": no_shell, "no_rm": no_rm}
    registries = []
    for names, applied in parts:
        registry = ToolRegistry([make(name, on_collision="replace") for name in names])
        for name in sorted(applied):
            registry.restrict(checks[name])
        registries.append(registry)
    merged = ToolRegistry.merge(registries)
    used = [checks[name] for _, applied in parts for name in applied]
    assert all(check(tool) for tool in merged for check in used)
    expected = {
        name for names, _ in parts for name in names if all(check(make(name)) for check in used)
    }
    assert {tool.name for tool in merged} == expected
    for name in ("rm", "shell9"):
        if name not in merged:
            assert merged.register(make(name)) is all(check(make(name)) for check in used)


async def test_a_policy_denied_tool_merged_in_by_middleware_is_never_offered() -> None:
    """The seeds' ``ctx.tools = ToolRegistry.merge([ctx.tools, other])`` keeps a policy's denial."""
    ran: list[str] = []
    extra = ToolRegistry([make("shell", ran), make("lookup", ran)])

    add_tools = Middleware("add_tools")

    @add_tools.dispatch_input
    async def merge_in(ctx: DispatchContext, call_next: CallNext) -> None:
        ctx.tools = ToolRegistry.merge([ctx.tools, extra], on_collision="keep")
        await call_next()

    model = ScriptedModel([
        ModelResponse(tool_calls=[
            ProposedToolCall(id="c1", name="shell", arguments=json.dumps({})),
            ProposedToolCall(id="c2", name="lookup", arguments=json.dumps({})),
        ]),
    ])
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[make("a", ran)],
        middleware=[ToolPolicy(deny=["shell*"]), add_tools],
    )
    result = await runner.run("go")
    offered = [[tool["name"] for tool in request.tools] for request in model.requests]
    assert offered == [["a", "lookup"], ["a", "lookup"]]
    assert ran == ["lookup"]
    assert [(c.tool, c.is_error) for c in result.tool_calls] == [("shell", True), ("lookup", False)]
