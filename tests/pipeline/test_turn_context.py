"""TurnContext / DispatchContext semantics: stored calls, counts, signals, on_ack."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from middleware import Middleware
from pipeline import (
    DispatchContext,
    Tool,
    ToolLoopExecutor,
    TurnContext,
    TurnRunner,
    tool_call_checksum,
)
from pipeline.calls import ToolCall
from pipeline.errors import (
    AlreadySignalledError,
    InvalidToolCallError,
    NackedError,
    PolicyViolationError,
)
from pipeline.events import Event, Log, ToolCallStored
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.stores import MemoryStore
from pipeline.testing import ScriptedModel, make_dispatch_context


def done_call(call_id: str, text: str = "x", *, tool: str = "echo") -> ToolCall:
    return ToolCall.completed(id=call_id, tool=tool, args={"text": text}, results=f"result {text}")


def same_echo(n: int) -> list[ModelResponse]:
    args = json.dumps({"text": "same"})
    steps = [
        ModelResponse(tool_calls=[ProposedToolCall(id=f"c{i}", name="echo", arguments=args)])
        for i in range(n)
    ]
    return [*steps, ModelResponse(text="done")]


# -- tool_call_count --------------------------------------------------------------------------


async def test_tool_call_count_counts_repeats_across_iterations(echo_tool: Tool[BaseModel]) -> None:
    """tool_call_count(checksum) grows by one for each stored call with that checksum."""
    counts: list[int] = []

    async def count(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            counts.append(ctx.tool_call_count(call.checksum))
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_output(count)
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(same_echo(3))),
        tools=[echo_tool],
        middleware=[plain],
    )
    result = await runner.run("go")
    assert counts == [1, 2, 3]
    assert len({c.checksum for c in result.tool_calls}) == 1
    assert result.tool_calls[0].checksum == tool_call_checksum("echo", {"text": "same"})


async def test_tool_call_count_includes_conversation_history(echo_tool: Tool[BaseModel]) -> None:
    """Calls of earlier turns in the conversation count for the next turn."""
    counts: list[int] = []

    async def count(ctx: DispatchContext, call_next: CallNext) -> None:
        for call in ctx.new_tool_calls:
            counts.append(ctx.tool_call_count(call.checksum))
        await call_next()

    store = MemoryStore()
    model = ScriptedModel(same_echo(2), cycle=True)
    plain = Middleware("plain")
    plain.dispatch_output(count)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[echo_tool], store=store, middleware=[plain]
    )
    await runner.run("one", conversation_id="conv")
    await runner.run("two", conversation_id="conv")
    assert counts == [1, 2, 3, 4]
    assert [len(r.tool_calls) for r in model.requests] == [0, 1, 2, 2, 3, 4]


async def test_reused_provider_ids_never_replace_calls_of_earlier_turns(
    echo_tool: Tool[BaseModel],
) -> None:
    """A provider id already used in the conversation is made unique, so no call is lost."""
    store = MemoryStore()
    model = ScriptedModel(same_echo(1), cycle=True)
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo_tool], store=store)
    first = await runner.run("one", conversation_id="conv")
    second = await runner.run("two", conversation_id="conv")
    first_ids = [c.id for c in first.tool_calls]
    second_ids = [c.id for c in second.tool_calls]
    assert first_ids == ["c0"]
    assert set(first_ids).isdisjoint(second_ids)
    _, stored = await store.load_conversation("conv")
    assert [c.id for c in stored] == first_ids + second_ids


def test_tool_call_count_is_zero_for_unknown_checksums() -> None:
    """An unseen checksum counts 0; make_dispatch_context's calls count too."""
    call = done_call("a")
    ctx = make_dispatch_context(tool_calls=[call], history_tool_calls=[done_call("h")])
    assert ctx.tool_call_count("0" * 64) == 0
    assert ctx.tool_call_count(call.checksum) == 2


# -- store / mutate / delete ------------------------------------------------------------------


class RecordingStore(MemoryStore):
    """A MemoryStore that logs each tool-call write and delete."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        self.log.append(f"save {call.id}")
        await super().save_tool_call(conversation_id, turn_id, call)

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        self.log.append(f"delete {call_id}")
        return await super().delete_tool_call(conversation_id, turn_id, call_id)


async def test_store_tool_call_persists_before_emitting_and_returning() -> None:
    """The store has the call before ToolCallStored fires and before store_tool_call returns."""
    store = RecordingStore()
    events: list[Event] = []
    ctx = make_dispatch_context(store=store, events=events)
    store.log.append("before")
    events_at_save: list[int] = []
    original = store.save_tool_call

    async def spy(conversation_id: str | None, turn_id: str, call: ToolCall) -> None:
        events_at_save.append(len(events))
        await original(conversation_id, turn_id, call)

    store.save_tool_call = spy  # type: ignore[method-assign]
    call = done_call("a")
    await ctx.store_tool_call(call)
    assert store.log == ["before", "save a"]
    assert events_at_save == [0]
    assert [type(e) for e in events] == [ToolCallStored]
    assert ctx.turn_tool_calls == (call,)
    assert ctx.new_tool_calls == (call,)
    assert ctx.get_tool_call("a") is call


async def test_storing_a_duplicate_id_raises_invalid_tool_call() -> None:
    """A second store_tool_call with the same id is refused; use mutate_tool_call instead."""
    ctx = make_dispatch_context()
    await ctx.store_tool_call(done_call("a"))
    with pytest.raises(InvalidToolCallError, match="mutate_tool_call") as info:
        await ctx.store_tool_call(done_call("a", "other"))
    assert info.value.code == "E_INVALID_INITIAL_TOOL_CALL_VALUE"
    assert len(ctx.turn_tool_calls) == 1


async def test_a_custom_executor_reusing_an_earlier_turns_id_cannot_overwrite_it() -> None:
    """Storing an id already used in the conversation fails the turn; the old call survives."""
    store = MemoryStore()

    async def fixed_ids(ctx: DispatchContext) -> None:
        await ctx.store_tool_call(done_call("call_1", ctx.input))
        ctx.ack()

    runner = TurnRunner(executor=fixed_ids, store=store)
    first = await runner.run("one", conversation_id="conv")
    second = await runner.run("two", conversation_id="conv")
    assert first.status == "completed"
    assert second.status == "failed"
    cause = second.errors[0].__cause__
    assert isinstance(cause, InvalidToolCallError)
    assert "earlier turn" in str(cause)
    _, stored = await store.load_conversation("conv")
    assert stored == first.tool_calls


async def test_mutate_tool_call_replaces_in_place_and_moves_the_count() -> None:
    """mutate_tool_call keeps the position, updates counts and persists the new version."""
    store = RecordingStore()
    events: list[Event] = []
    ctx = make_dispatch_context(store=store, events=events)
    first, second, third = done_call("a", "1"), done_call("b", "2"), done_call("c", "3")
    for call in (first, second, third):
        await ctx.store_tool_call(call)
    replacement = dataclasses.replace(done_call("b", "changed"), is_error=True)
    await ctx.mutate_tool_call(replacement)
    assert [c.id for c in ctx.turn_tool_calls] == ["a", "b", "c"]
    assert ctx.turn_tool_calls[1] is replacement
    assert ctx.new_tool_calls[1] is replacement
    assert ctx.get_tool_call("b") is replacement
    assert ctx.tool_call_count(second.checksum) == 0
    assert ctx.tool_call_count(replacement.checksum) == 1
    assert store.log[-1] == "save b"
    stored = [e for e in events if isinstance(e, ToolCallStored)]
    assert stored[-1].call is replacement


async def test_mutating_an_unknown_call_raises() -> None:
    """mutate_tool_call on an id that was never stored raises InvalidToolCallError."""
    ctx = make_dispatch_context()
    with pytest.raises(InvalidToolCallError):
        await ctx.mutate_tool_call(done_call("ghost"))


async def test_delete_tool_call_removes_everywhere_and_reports_existence() -> None:
    """delete_tool_call returns True once, then False; the call leaves every view and count."""
    store = RecordingStore()
    ctx = make_dispatch_context(store=store)
    keep, gone = done_call("keep", "1"), done_call("gone", "2")
    await ctx.store_tool_call(keep)
    await ctx.store_tool_call(gone)
    assert await ctx.delete_tool_call("gone") is True
    assert await ctx.delete_tool_call("gone") is False
    assert ctx.turn_tool_calls == (keep,)
    assert ctx.new_tool_calls == (keep,)
    assert ctx.get_tool_call("gone") is None
    assert ctx.tool_call_count(gone.checksum) == 0
    assert store.log == ["save keep", "save gone", "delete gone"]


async def test_stored_calls_survive_in_the_store_of_a_conversation(
    echo_tool: Tool[BaseModel],
) -> None:
    """A deleted call leaves the conversation store; a mutated one is replaced there."""

    async def edit(ctx: DispatchContext, call_next: CallNext) -> None:
        calls = ctx.new_tool_calls
        if len(calls) == 2:
            await ctx.delete_tool_call(calls[0].id)
            await ctx.mutate_tool_call(dataclasses.replace(calls[1], inline=False))
        await call_next()

    two = ModelResponse(
        tool_calls=[
            ProposedToolCall(id="x", name="echo", arguments='{"text": "1"}'),
            ProposedToolCall(id="y", name="echo", arguments='{"text": "2"}'),
        ]
    )
    store = MemoryStore()
    plain = Middleware("plain")
    plain.dispatch_output(edit)
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([two])),
        tools=[echo_tool],
        store=store,
        middleware=[plain],
    )
    result = await runner.run("go", conversation_id="c")
    _, stored = await store.load_conversation("c")
    assert [c.id for c in stored] == ["y"]
    assert stored[0].inline is False
    assert [c.id for c in result.tool_calls] == ["y"]


async def test_new_tool_calls_hold_only_the_current_iteration(echo_tool: Tool[BaseModel]) -> None:
    """new_tool_calls is reset every iteration while turn_tool_calls accumulates."""
    before: list[tuple[int, int, int]] = []
    after: list[tuple[int, int, int]] = []

    async def look_before(ctx: DispatchContext, call_next: CallNext) -> None:
        before.append((ctx.iteration, len(ctx.new_tool_calls), len(ctx.turn_tool_calls)))
        await call_next()

    async def look_after(ctx: DispatchContext, call_next: CallNext) -> None:
        after.append((ctx.iteration, len(ctx.new_tool_calls), len(ctx.turn_tool_calls)))
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_input(look_before)
    plain.dispatch_output(look_after)
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(same_echo(2))),
        tools=[echo_tool],
        middleware=[plain],
    )
    await runner.run("go")
    assert before == [(0, 0, 0), (1, 0, 1), (2, 0, 2)]
    assert after == [(0, 1, 1), (1, 1, 2)]


# -- signals and on_ack -----------------------------------------------------------------------


def test_ack_runs_on_ack_handlers_in_order_despite_a_raising_one() -> None:
    """on_ack handlers run in order at ack; one that raises is logged and the rest still run."""
    events: list[Event] = []
    ctx = make_dispatch_context(events=events)
    order: list[str] = []

    def broken() -> None:
        order.append("broken")
        raise RuntimeError("handler failed")

    ctx.on_ack(lambda: order.append("first"))
    ctx.on_ack(broken)
    unsubscribe = ctx.on_ack(lambda: order.append("removed"))
    ctx.on_ack(lambda: order.append("last"))
    unsubscribe()
    ctx.ack()
    assert order == ["first", "broken", "last"]
    assert ctx.is_acked
    assert ctx.is_signalled
    logs = [e for e in events if isinstance(e, Log)]
    assert len(logs) == 1
    assert logs[0].level == "error"
    assert "handler failed" in logs[0].message


def test_nack_does_not_run_on_ack_handlers() -> None:
    """nack() never calls on_ack handlers; nack_error defaults to NackedError."""
    ctx = make_dispatch_context()
    ran: list[str] = []
    ctx.on_ack(lambda: ran.append("ack"))
    ctx.nack()
    assert ran == []
    assert ctx.is_signalled
    assert not ctx.is_acked
    assert isinstance(ctx.nack_error, NackedError)


def test_nack_with_an_error_keeps_it() -> None:
    """nack(error) records exactly that error."""
    ctx = make_dispatch_context()
    error = PolicyViolationError("denied", policy="p")
    ctx.nack(error)
    assert ctx.nack_error is error


async def test_nack_with_a_non_loop_error_is_refused_and_the_turn_still_ends() -> None:
    """nack(ValueError()) raises TypeError; an executor doing it fails the turn, not run()."""
    ctx = make_dispatch_context()
    with pytest.raises(TypeError, match="LoopError"):
        ctx.nack(ValueError("nope"))  # type: ignore[arg-type]
    assert not ctx.is_signalled

    async def sloppy(ctx: DispatchContext) -> None:
        ctx.nack(ValueError("nope"))  # type: ignore[arg-type]

    result = await TurnRunner(executor=sloppy).run("go")
    assert result.status == "failed"
    assert [e.code for e in result.errors] == ["E_LLM_EXECUTION_EXECUTOR_ERROR"]


@pytest.mark.parametrize(
    ("first", "second"),
    [("ack", "ack"), ("ack", "nack"), ("nack", "ack"), ("nack", "nack")],
    ids=["ack-ack", "ack-nack", "nack-ack", "nack-nack"],
)
def test_a_second_signal_raises_already_signalled(first: str, second: str) -> None:
    """Any second ack()/nack() raises AlreadySignalledError and keeps the first signal."""
    ctx = make_dispatch_context()
    getattr(ctx, first)()
    with pytest.raises(AlreadySignalledError) as info:
        getattr(ctx, second)()
    assert info.value.code == "E_LLM_EXECUTION_ALREADY_SIGNALLED"
    assert ctx.is_acked == (first == "ack")


async def test_ephemeral_tools_are_pruned_on_ack(echo_tool: Tool[BaseModel]) -> None:
    """A turn-local ephemeral tool is dropped from the turn registry when the dispatch acks."""
    after: list[list[str]] = []

    class NoArgs(BaseModel):
        pass

    def handler(args: NoArgs, ctx: DispatchContext, meta: object) -> str:
        return "temp"

    temp = Tool(
        name="temp", description="Temporary.", input_schema=NoArgs, handler=handler, ephemeral=True
    )

    async def add_temp(ctx: DispatchContext, call_next: CallNext) -> None:
        if ctx.iteration == 0:
            ctx.tools.register(temp)
        await call_next()

    async def check(ctx: TurnContext, call_next: CallNext) -> None:
        await call_next()
        after.append([t.name for t in ctx.tools.all()])

    plain = Middleware("plain")
    plain.dispatch_input(add_temp)
    plain.turn_output(check)
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([])),
        tools=[echo_tool],
        middleware=[plain],
    )
    await runner.run("go")
    assert after == [["echo"]]


# -- views and logging ------------------------------------------------------------------------


def test_views_are_read_only_and_compare_like_tuples() -> None:
    """messages and turn_tool_calls are read-only sequences equal to the tuples they show."""
    message = Message(role="user", content="hi")
    ctx = make_dispatch_context(messages=[message], tool_calls=[done_call("a")])
    views: Sequence[object] = ctx.messages
    assert not hasattr(views, "append")
    assert ctx.messages == (message,)
    assert ctx.turn_tool_calls == (done_call_like := ctx.turn_tool_calls[0],)
    assert done_call_like.id == "a"
    assert ctx.turn.messages == ctx.messages


def test_log_emits_log_events_with_payload() -> None:
    """ctx.log.<level>(kind, message, **payload) emits a Log event for the turn."""
    events: list[Event] = []
    ctx = make_dispatch_context(events=events, turn_id="turn_x")
    ctx.log.debug("k.debug", "d")
    ctx.log.info("policy.decision", "allowed echo", tool="echo", action="allowed")
    ctx.log.warning("k.warn", "w")
    ctx.turn.log.error("k.error", "e", code=3)
    logs = [e for e in events if isinstance(e, Log)]
    assert [(e.level, e.kind) for e in logs] == [
        ("debug", "k.debug"),
        ("info", "policy.decision"),
        ("warning", "k.warn"),
        ("error", "k.error"),
    ]
    assert logs[1].payload == {"tool": "echo", "action": "allowed"}
    assert logs[3].payload == {"code": 3}
    assert {e.turn_id for e in logs} == {"turn_x"}


def test_dispatch_context_delegates_to_its_turn() -> None:
    """The dispatch shares the turn's id, stash, tools, input and abort state."""
    ctx = make_dispatch_context(turn_id="turn_y", input="question", system_prompt="sp")
    turn = ctx.turn
    assert ctx.turn_id == turn.turn_id == "turn_y"
    assert ctx.stash is turn.stash
    assert ctx.tools is turn.tools
    assert ctx.input == turn.input == "question"
    assert ctx.system_prompt == "sp"
    assert ctx.conversation_id is None
    ctx.abort("why")
    assert turn.aborted
    assert ctx.aborted
    assert turn.abort_reason == ctx.abort_reason == "why"
