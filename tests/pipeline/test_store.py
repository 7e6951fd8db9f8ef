"""The `TurnStore` contract: `MemoryStore`, `SqliteStore` and `PostgresStore` pass one suite.

The `store` fixture (``tests/pipeline/conftest.py``) runs every test against each of them.
"""

from __future__ import annotations

import json
from typing import Any

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool, tool_call_checksum
from pipeline.calls import ToolCall
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore, TurnStore
from pipeline.testing import ScriptedModel


def call(call_id: str, text: str = "hi", *, tool_name: str = "echo") -> ToolCall:
    return ToolCall.completed(id=call_id, tool=tool_name, args={"text": text}, results=text)


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def echo_step(call_id: str, text: str) -> ModelResponse:
    arguments = json.dumps({"text": text})
    proposed = ProposedToolCall(id=call_id, name="echo", arguments=arguments)
    return ModelResponse(tool_calls=[proposed])


async def test_conversation_loads_messages_and_calls_in_storage_order(store: TurnStore) -> None:
    """Saved messages and calls of a conversation come back in the order they were saved."""
    first, second = Message(role="user", content="one"), Message(role="assistant", content="two")
    a, b = call("a", "x"), call("b", "y")
    await store.save_message("c1", "t1", first)
    await store.save_tool_call("c1", "t1", a)
    await store.save_message("c1", "t2", second)
    await store.save_tool_call("c1", "t2", b)
    messages, calls = await store.load_conversation("c1")
    assert list(messages) == [first, second]
    assert list(calls) == [a, b]
    assert calls[1].checksum == tool_call_checksum("echo", {"text": "y"})


async def test_saving_a_call_again_replaces_it_in_place(store: TurnStore) -> None:
    """Re-saving a call id replaces the record and keeps its position."""
    for call_id in ("a", "b", "c"):
        await store.save_tool_call("c1", "t1", call(call_id))
    await store.save_tool_call("c1", "t1", call("a", "changed"))
    _, calls = await store.load_conversation("c1")
    assert [c.id for c in calls] == ["a", "b", "c"]
    assert calls[0].results == "changed"


async def test_delete_reports_whether_the_call_existed(store: TurnStore) -> None:
    """Deleting removes the call from the conversation and returns False the second time."""
    await store.save_tool_call("c1", "t1", call("a"))
    await store.save_tool_call("c1", "t1", call("b"))
    assert await store.delete_tool_call("c1", "t1", "a") is True
    assert await store.delete_tool_call("c1", "t1", "a") is False
    _, calls = await store.load_conversation("c1")
    assert [c.id for c in calls] == ["b"]


async def test_conversations_are_isolated(store: TurnStore) -> None:
    """Calls and messages of one conversation never appear in another or in none."""
    await store.save_tool_call("c1", "t1", call("a"))
    await store.save_message("c1", "t1", Message(role="user", content="c1 only"))
    await store.save_tool_call(None, "t2", call("z"))
    messages, calls = await store.load_conversation("c2")
    assert (list(messages), list(calls)) == ([], [])
    _, calls = await store.load_conversation("c1")
    assert [c.id for c in calls] == ["a"]


async def test_message_saved_twice_is_replaced(store: TurnStore) -> None:
    """A message re-saved under its id replaces the earlier version in place."""
    message = Message(role="assistant", content="draft")
    await store.save_message("c1", "t1", message)
    await store.save_message("c1", "t1", Message(role="user", content="next"))
    edited = Message(
        role="assistant", content="final", id=message.id, created_at=message.created_at
    )
    await store.save_message("c1", "t1", edited)
    messages, _ = await store.load_conversation("c1")
    assert [m.content for m in messages] == ["final", "next"]


async def test_three_turns_share_a_conversation(store: TurnStore) -> None:
    """The third turn of a conversation counts the first two turns' calls and sees their text."""
    seen_counts: list[int] = []
    checksum = tool_call_checksum("echo", {"text": "ping"})

    async def count(ctx: DispatchContext, call_next: Any) -> None:
        if ctx.iteration == 0:
            seen_counts.append(ctx.tool_call_count(checksum))
        await call_next()

    model = ScriptedModel(
        [
            echo_step("t1-call", "ping"),
            ModelResponse(text="first answer"),
            echo_step("t2-call", "ping"),
            ModelResponse(text="second answer"),
            echo_step("t3-call", "ping"),
            ModelResponse(text="third answer"),
        ]
    )
    plain = Middleware("plain")
    plain.dispatch_input(count)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model), tools=[echo], store=store, middleware=[plain]
    )
    results = [await runner.run(f"turn {i}", conversation_id="conv") for i in range(3)]
    assert [r.status for r in results] == ["completed"] * 3
    assert seen_counts == [0, 1, 2]
    third = model.requests[4]  # the third turn's first model request
    contents = [m.content for m in third.messages]
    assert contents[0] == "turn 0"
    assert {"first answer", "turn 1", "second answer", "turn 2"} <= set(contents)
    assert [c.id for c in third.tool_calls] == ["t1-call", "t2-call"]
    assert results[2].tool_calls[0].id == "t3-call"
    assert len(results[2].tool_calls) == 1
    _, calls = await store.load_conversation("conv")
    assert [c.id for c in calls] == ["t1-call", "t2-call", "t3-call"]


async def test_turns_without_conversation_do_not_leak_into_one(store: TurnStore) -> None:
    """A turn run without a conversation id adds nothing to any conversation."""
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([echo_step("x", "a")])), tools=[echo], store=store
    )
    result = await runner.run("hello")
    assert result.status == "completed"
    assert len(result.tool_calls) == 1
    seen: list[int] = []

    async def count(ctx: DispatchContext, call_next: Any) -> None:
        seen.append(len(ctx.messages))
        await call_next()

    plain = Middleware("plain")
    plain.dispatch_input(count)
    later_runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([])), store=store, middleware=[plain]
    )
    await later_runner.run("fresh", conversation_id="new")
    assert seen == [1]  # only its own user message


class _CountingStore(MemoryStore):
    """A user's store built on the default one: it sees every save, conversation or not."""

    def __init__(self) -> None:
        super().__init__()
        self.saves: list[str] = []

    async def save_message(self, conversation_id: str | None, turn_id: str, message: Any) -> None:
        self.saves.append("message")
        await super().save_message(conversation_id, turn_id, message)

    async def save_tool_call(self, conversation_id: str | None, turn_id: str, call: Any) -> None:
        self.saves.append("call")
        await super().save_tool_call(conversation_id, turn_id, call)

    async def save_turn(self, record: Any) -> None:
        self.saves.append("turn")
        await super().save_turn(record)


async def test_a_store_derived_from_the_default_sees_every_save_without_a_conversation() -> None:
    """Only the default store's no-op saves are skipped; a subclass gets every call."""
    store = _CountingStore()
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ProposedToolCall(id="c1", name="echo", arguments="{}")]),
            ModelResponse(text="done"),
        ]
    )

    @tool
    def echo() -> str:
        """Say ok."""
        return "ok"

    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[echo], store=store)
    result = await runner.run("go")
    assert result.status == "completed"
    assert store.saves == ["message", "message", "call", "message", "turn"]
