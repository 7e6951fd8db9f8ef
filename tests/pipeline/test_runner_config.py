"""`TurnRunner` construction and `run()` arguments: validation, run_sync, describe."""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any

import pytest
from pydantic import BaseModel

from middleware import Middleware
from pipeline import DispatchContext, Tool, ToolLoopExecutor, ToolRegistry, TurnRunner, tool
from pipeline.errors import InvalidRunnerConfigError, InvalidStashValueError
from pipeline.models import Message, ModelResponse
from pipeline.stages import CallNext, MiddlewareSpec
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel


async def answer(ctx: DispatchContext) -> None:
    """A minimal executor: answer "ok" and ack."""
    await ctx.store_message(Message(role="assistant", content="ok"))
    ctx.ack()


def make_echo(name: str = "echo") -> Tool[BaseModel]:
    @tool(name=name)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return echo


def sync_answer(ctx: DispatchContext) -> Awaitable[None]:
    """A sync function returning an awaitable: typed like an executor, but not async."""
    return answer(ctx)


class SyncCall:
    """An object whose ``__call__`` is sync."""

    def __call__(self, ctx: DispatchContext) -> Awaitable[None]:
        return answer(ctx)


class AsyncCall:
    """An object whose ``__call__`` is async (what `ToolLoopExecutor` is)."""

    async def __call__(self, ctx: DispatchContext) -> None:
        await answer(ctx)


async def answer_with(ctx: DispatchContext, text: str) -> None:
    await ctx.store_message(Message(role="assistant", content=text))
    ctx.ack()


def test_every_bad_field_is_named_at_once() -> None:
    """One InvalidRunnerConfigError lists every bad field, not just the first."""
    echo = make_echo()
    with pytest.raises(InvalidRunnerConfigError) as info:
        TurnRunner(
            executor=sync_answer,
            tools=[echo, make_echo()],
            middleware=[object()],
            store=object(),  # type: ignore[arg-type]
            spool=object(),  # type: ignore[arg-type]
            max_iterations=0,
        )
    error = info.value
    assert error.code == "E_INVALID_TURN_RUNNER_CONFIG"
    assert error.status == 529
    assert error.fatal
    assert list(error.fields) == [
        "executor",
        "tools",
        "middleware",
        "store",
        "spool",
        "max_iterations",
    ]
    message = str(error)
    for needle in (
        "executor",
        "duplicate tool name 'echo'",
        "is not middleware",
        "store",
        "spool",
        "max_iterations",
    ):
        assert needle in message


BAD_CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    "executor-not-callable": ({"executor": "model"}, "executor"),
    "executor-sync-function": ({"executor": sync_answer}, "executor"),
    "executor-sync-call": ({"executor": SyncCall()}, "executor"),
    "tools-duplicate": ({"tools": [make_echo(), make_echo()]}, "tools"),
    "middleware-not-middleware": ({"middleware": [object()]}, "middleware"),
    "middleware-a-string": ({"middleware": "policy"}, "middleware"),
    "store-missing-methods": ({"store": object()}, "store"),
    "spool-missing-methods": ({"spool": object()}, "spool"),
    "max-iterations-zero": ({"max_iterations": 0}, "max_iterations"),
    "max-iterations-negative": ({"max_iterations": -1}, "max_iterations"),
    "max-iterations-bool": ({"max_iterations": True}, "max_iterations"),
}


@pytest.mark.parametrize(
    "executor",
    [answer, AsyncCall(), functools.partial(answer_with, text="partial")],
    ids=["async-def", "async-call", "partial-of-async-def"],
)
def test_async_callables_are_accepted_as_executors(executor: Any) -> None:
    """An async def, an object with an async __call__, or a partial of an async def will do."""
    result = TurnRunner(executor=executor).run_sync("hi")
    assert result.status == "completed"


def test_the_per_stage_keyword_arguments_are_gone() -> None:
    """Middleware come in through `middleware=[...]` only; the old stage keywords are refused."""

    async def passthrough(ctx: Any, call_next: CallNext) -> None:
        await call_next()

    with pytest.raises(TypeError, match="dispatch_output"):
        TurnRunner(executor=answer, dispatch_output=[passthrough])  # type: ignore[call-arg]


class SpecProvider:
    """A hand-written middleware provider (what ``middleware.Middleware`` sets implement)."""

    def __init__(self, spec: MiddlewareSpec) -> None:
        self.spec = spec

    def middleware_specs(self) -> list[MiddlewareSpec]:
        return [self.spec]


async def passthrough(ctx: Any, call_next: CallNext) -> None:
    await call_next()


BAD_SPECS: dict[str, MiddlewareSpec] = {
    "order-not-int": MiddlewareSpec("turn_input", "p", passthrough, order="1"),  # type: ignore[arg-type]
    "fn-not-callable": MiddlewareSpec("turn_input", "p", None),  # type: ignore[arg-type]
    "name-not-str": MiddlewareSpec("turn_input", None, passthrough),  # type: ignore[arg-type]
    "unknown-stage": MiddlewareSpec("executor", "p", passthrough),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("spec", list(BAD_SPECS.values()), ids=list(BAD_SPECS))
def test_a_provider_with_a_malformed_spec_is_a_config_error(spec: MiddlewareSpec) -> None:
    """A spec the runner could not order or run is refused at construction, naming middleware."""
    others = [SpecProvider(MiddlewareSpec("turn_input", "ok", passthrough))]
    with pytest.raises(InvalidRunnerConfigError) as info:
        TurnRunner(executor=answer, middleware=[*others, SpecProvider(spec)])
    assert set(info.value.fields) == {"middleware"}


@pytest.mark.parametrize("case", list(BAD_CONFIGS), ids=list(BAD_CONFIGS))
def test_each_bad_field_raises_naming_it(case: str) -> None:
    """Each kind of bad option raises InvalidRunnerConfigError naming exactly that field."""
    options, field = BAD_CONFIGS[case]
    kwargs: dict[str, Any] = {"executor": answer, **options}
    with pytest.raises(InvalidRunnerConfigError) as info:
        TurnRunner(**kwargs)
    assert set(info.value.fields) == {field}
    assert field in info.value.message


def test_valid_options_are_accepted() -> None:
    """max_iterations=None, a ToolRegistry as tools, a store and a prompt are all fine."""
    registry = ToolRegistry([make_echo()])
    runner = TurnRunner(
        executor=answer,
        tools=registry,
        store=MemoryStore(),
        system_prompt="hi",
        max_iterations=None,
    )
    assert [t.name for t in runner.tools.all()] == ["echo"]
    assert "max_iterations=None" in repr(runner)


def test_runner_tools_is_a_copy_of_the_baseline() -> None:
    """Editing runner.tools never changes the runner's baseline registry."""
    runner = TurnRunner(executor=answer, tools=[make_echo()])
    copy = runner.tools
    copy.unregister("echo")
    copy.register(make_echo("other"))
    assert [t.name for t in runner.tools.all()] == ["echo"]


def test_baseline_registry_passed_in_is_copied() -> None:
    """Mutating the registry given to the runner afterwards does not change the runner."""
    registry = ToolRegistry([make_echo()])
    runner = TurnRunner(executor=answer, tools=registry)
    registry.register(make_echo("late"))
    assert [t.name for t in runner.tools.all()] == ["echo"]


@pytest.mark.parametrize(
    "bad_input", [None, b"bytes", 5, ["hi"]], ids=["none", "bytes", "int", "list"]
)
async def test_run_with_non_str_input_raises_type_error(bad_input: Any) -> None:
    """run() rejects a non-string input with TypeError before any turn starts."""
    runner = TurnRunner(executor=answer)
    events: list[object] = []
    runner.on_any(events.append)
    with pytest.raises(TypeError, match="string"):
        await runner.run(bad_input)
    assert events == []


@pytest.mark.parametrize("conversation_id", ["", 5], ids=["empty", "int"])
async def test_run_with_a_bad_conversation_id_raises_type_error(conversation_id: Any) -> None:
    """run() rejects an empty or non-string conversation id."""
    runner = TurnRunner(executor=answer)
    with pytest.raises(TypeError, match="conversation_id"):
        await runner.run("hi", conversation_id=conversation_id)


async def test_run_with_a_non_plain_stash_raises_invalid_stash_value() -> None:
    """A stash seed that is not plain data is rejected with InvalidStashValueError."""
    runner = TurnRunner(executor=answer)
    with pytest.raises(InvalidStashValueError):
        await runner.run("hi", stash={"bad": object()})


def test_run_sync_runs_a_turn_from_synchronous_code() -> None:
    """run_sync runs a whole turn without an event loop and returns its result."""
    model = ScriptedModel([ModelResponse(text="from sync")])
    runner = TurnRunner(executor=ToolLoopExecutor(model))
    result = runner.run_sync("hi", stash={"k": 1})
    assert result.status == "completed"
    assert result.output == "from sync"
    assert result.stash == {"k": 1}


def test_start_needs_a_running_loop() -> None:
    """start() outside an event loop raises RuntimeError instead of leaking a coroutine."""
    runner = TurnRunner(executor=answer)
    with pytest.raises(RuntimeError):
        _ = runner.start("hi")


def test_describe_pipelines_lists_plain_middleware_in_order() -> None:
    """describe_pipelines names each stage's middleware outermost first."""

    async def first(ctx: Any, call_next: CallNext) -> None:
        await call_next()

    async def second(ctx: Any, call_next: CallNext) -> None:
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_input(first)
    plain.dispatch_input(second)
    plain.turn_output(second)
    runner = TurnRunner(executor=answer, middleware=[plain])
    described = runner.describe_pipelines()
    assert list(described) == [
        "turn_input",
        "dispatch_input",
        "tool_call",
        "dispatch_output",
        "turn_output",
    ]
    assert described["turn_input"] == []
    assert [name.rsplit(".", 1)[-1] for name in described["dispatch_input"]] == [
        "first",
        "second",
    ]
    assert len(described["turn_output"]) == 1
    described["turn_input"].append("tampered")
    assert runner.describe_pipelines()["turn_input"] == []
