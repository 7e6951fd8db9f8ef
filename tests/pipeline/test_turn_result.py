"""`TurnResult` (DESIGN 6.1, 12): raise_for_status, the stash snapshot, messages and the record."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pipeline import (
    CallNext,
    DispatchContext,
    MemoryStore,
    Message,
    ModelResponse,
    NackedError,
    PolicyViolationError,
    ProposedToolCall,
    Stash,
    ToolLoopExecutor,
    TurnAbortedError,
    TurnContext,
    TurnRunner,
    tool,
)
from pipeline.testing import ScriptedModel


async def answer(ctx: DispatchContext) -> None:
    await ctx.store_message(Message(role="assistant", content="ok"))
    ctx.ack()


async def test_raise_for_status_is_silent_for_a_completed_turn() -> None:
    """A completed turn's raise_for_status() returns None and ok is True."""
    result = await TurnRunner(executor=answer).run("hi")
    assert result.ok
    result.raise_for_status()


async def test_raise_for_status_raises_the_first_error_of_a_failed_turn() -> None:
    """A failed turn re-raises its first recorded error, the very same object."""
    first = PolicyViolationError("first", policy="p")

    async def executor(ctx: DispatchContext) -> None:
        ctx.nack(first)

    result = await TurnRunner(executor=executor).run("hi")
    assert not result.ok
    with pytest.raises(PolicyViolationError) as info:
        result.raise_for_status()
    assert info.value is first


async def test_raise_for_status_raises_turn_aborted_for_an_aborted_turn() -> None:
    """An aborted turn raises TurnAbortedError carrying the reason and turn id."""

    async def executor(ctx: DispatchContext) -> None:
        ctx.abort("user left")

    result = await TurnRunner(executor=executor).run("hi")
    assert result.status == "aborted"
    with pytest.raises(TurnAbortedError, match="user left") as info:
        result.raise_for_status()
    assert info.value.turn_id == result.turn_id  # type: ignore[attr-defined]
    assert info.value.code == "E_TURN_ABORTED"


async def test_stash_is_a_deep_snapshot_at_turn_end() -> None:
    """result.stash is a plain dict of the final stash; editing it touches nothing else."""
    seed: dict[str, Any] = {"user": {"id": 7, "tags": ["a"]}}
    captured: list[Stash] = []

    async def writer(ctx: TurnContext, call_next: CallNext) -> None:
        captured.append(ctx.stash)
        ctx.stash.set("user.tags", ["a", "b"])
        await call_next()
        ctx.stash.set("late", "written in the post-step")

    runner = TurnRunner(executor=answer, turn_output=[writer])
    result = await runner.run("hi", stash=seed)
    assert type(result.stash) is dict
    assert result.stash == {
        "user": {"id": 7, "tags": ["a", "b"]},
        "late": "written in the post-step",
    }
    assert seed == {"user": {"id": 7, "tags": ["a"]}}
    result.stash["user"]["tags"].append("mutated")
    assert captured[0].get("user.tags") == ["a", "b"]
    again = await runner.run("hi", stash=seed)
    assert again.stash["user"]["tags"] == ["a", "b"]


async def test_result_is_frozen() -> None:
    """A TurnResult cannot be modified."""
    result = await TurnRunner(executor=answer).run("hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "failed"  # type: ignore[misc]


async def test_timestamps_are_aware_and_ordered() -> None:
    """started_at and ended_at are timezone-aware and in order."""
    result = await TurnRunner(executor=answer).run("hi")
    assert result.started_at.tzinfo is not None
    assert result.started_at <= result.ended_at


async def test_result_holds_only_this_turns_messages_in_a_conversation() -> None:
    """In a conversation, messages are this turn's (history is loaded but not repeated)."""
    store = MemoryStore()
    model = ScriptedModel([ModelResponse(text="one"), ModelResponse(text="two")])
    runner = TurnRunner(executor=ToolLoopExecutor(model), store=store)
    first = await runner.run("first", conversation_id="c")
    second = await runner.run("second", conversation_id="c")
    assert [m.content for m in first.messages] == ["first", "one"]
    assert [m.content for m in second.messages] == ["second", "two"]
    assert [m.content for m in model.requests[1].messages] == ["first", "one", "second"]
    assert second.conversation_id == "c"


async def test_the_turn_record_is_saved_with_status_and_error() -> None:
    """The store receives a TurnRecord with the outcome and the failing error's code."""

    async def nacking(ctx: DispatchContext) -> None:
        ctx.nack()

    store = MemoryStore()
    result = await TurnRunner(executor=nacking, store=store).run("hi", conversation_id="c")
    record = store.turn(result.turn_id)
    assert record is not None
    assert (record.status, record.input, record.output) == ("failed", "hi", None)
    assert record.error_code == NackedError.code
    assert record.iterations == result.iterations == 1


async def test_output_is_none_when_a_middleware_acks_before_the_model_answers() -> None:
    """Text that came with proposed tool calls is not the final answer; output stays None."""

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    async def stop_after_tools(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()
        if ctx.new_tool_calls:
            ctx.ack()

    call = ProposedToolCall(id="p1", name="ping", arguments="{}")
    model = ScriptedModel([ModelResponse(text="let me check", tool_calls=[call])])
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[ping], dispatch_output=[stop_after_tools]
    )
    result = await runner.run("hi")
    assert result.status == "completed"
    assert result.messages[-1].content == "let me check"
    assert result.output is None
