"""`TurnResult`: raise_for_status, the stash snapshot, messages and the record."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware import Middleware
from pipeline import (
    DispatchContext,
    Stash,
    StashKey,
    StashSnapshot,
    ToolLoopExecutor,
    TurnContext,
    TurnResult,
    TurnRunner,
    tool,
)
from pipeline.errors import (
    InvalidStashValueError,
    NackedError,
    PolicyViolationError,
    TurnAbortedError,
)
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.stores import MemoryStore
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
    assert info.value.turn_id == result.turn_id
    assert info.value.code == "E_TURN_ABORTED"


async def test_stash_is_the_final_stash_and_the_live_one_turns_read_only() -> None:
    """result.stash is a dict (a StashSnapshot) of the final stash, handed over without a copy:
    the live stash refuses writes once the turn ended, and editing the result touches neither
    the seed nor a later turn."""
    seed: dict[str, Any] = {"user": {"id": 7, "tags": ["a"]}}
    captured: list[Stash] = []

    async def writer(ctx: TurnContext, call_next: CallNext) -> None:
        captured.append(ctx.stash)
        ctx.stash.set("user.tags", ["a", "b"])
        await call_next()
        ctx.stash.set("late", "written in the post-step")

    plain = Middleware("plain")
    plain.turn_output(writer)
    runner = TurnRunner(executor=answer, middleware=[plain])
    result = await runner.run("hi", stash=seed)
    assert isinstance(result.stash, dict)
    assert type(result.stash) is StashSnapshot
    assert result.stash == {
        "user": {"id": 7, "tags": ["a", "b"]},
        "late": "written in the post-step",
    }
    assert seed == {"user": {"id": 7, "tags": ["a"]}}
    with pytest.raises(InvalidStashValueError, match="the turn has ended"):
        captured[0].set("user.tags", ["too", "late"])
    with pytest.raises(InvalidStashValueError, match="the turn has ended"):
        captured[0].increment("n")
    assert captured[0].get("user.tags") == ["a", "b"]  # reads still work (as copies)
    result.stash["user"]["tags"].append("mutated")
    assert seed == {"user": {"id": 7, "tags": ["a"]}}
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
    plain = Middleware("plain")
    plain.dispatch_output(stop_after_tools)
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[ping], middleware=[plain])
    result = await runner.run("hi")
    assert result.status == "completed"
    assert result.messages[-1].content == "let me check"
    assert result.output is None


COUNT = StashKey[int]("counts.search", default=0)


async def test_typed_keys_read_the_result_stash() -> None:
    """result.stash[key] reads the key's path as the turn left it, and `in` works for keys."""

    async def counting(ctx: DispatchContext) -> None:
        ctx.stash[COUNT] += 2
        await answer(ctx)

    result = await TurnRunner(executor=counting).run("hi", stash={"counts": {"search": 0}})
    assert result.stash[COUNT] == 2
    assert COUNT in result.stash
    assert StashKey[int]("counts.other") not in result.stash
    assert result.stash["counts"] == {"search": 2}


def make_result(stash: Any) -> TurnResult:
    now = datetime.now(UTC)
    return TurnResult(
        turn_id="t",
        conversation_id=None,
        status="completed",
        output=None,
        messages=(),
        tool_calls=(),
        errors=(),
        iterations=0,
        stash=stash,
        started_at=now,
        ended_at=now,
    )


def test_a_plain_dict_given_to_turn_result_becomes_a_snapshot() -> None:
    """TurnResult(stash=<dict>) keeps a StashSnapshot equal to it; a snapshot is kept as is."""
    plain = {"a": {"b": 1}}
    result = make_result(plain)
    assert type(result.stash) is StashSnapshot
    assert result.stash == plain
    assert result.stash[StashKey[int]("a.b")] == 1
    snapshot = StashSnapshot(plain)
    assert make_result(snapshot).stash is snapshot


def test_the_constructor_type_checkers_see_names_every_field() -> None:
    """The ``__init__`` declared for type checkers (under TYPE_CHECKING) lists the dataclass
    fields in order, so it cannot drift from the constructor the dataclass generates."""
    source = TurnResult.raise_for_status.__code__.co_filename  # the class reports `pipeline`
    with open(source, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    (declared,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "__init__"
    ]
    names = [arg.arg for arg in declared.args.kwonlyargs]
    assert names == [field.name for field in dataclasses.fields(TurnResult)]
    assert [p.name for p in inspect.signature(TurnResult).parameters.values()] == names


DATA: dict[str, Any] = {
    "counts": {"search": 3, "zero": 0},
    "flags": {"off": False, "none": None},
    "decisions": [{"tool": "a"}, {"tool": "b", "tags": ["x", "y"]}],
    "text": "hello",
}


@pytest.mark.parametrize(
    "path",
    [
        "counts",
        "counts.search",
        "counts.zero",
        "flags.off",
        "flags.none",
        "decisions.1.tool",
        "decisions.1.tags.0",
        "decisions",
        "decisions.2",
        "decisions.x",
        "decisions.-1",
        "text.0",
        "counts.search.deeper",
        "missing",
        "missing.path",
    ],
)
@pytest.mark.parametrize("default", ["none", 7, None, [1]], ids=["no-default", "7", "None", "list"])
def test_snapshot_reads_a_key_exactly_as_the_stash_does(path: str, default: Any) -> None:
    """snapshot[key] and `key in snapshot` agree with Stash for present, falsy, indexed and
    absent paths, with and without a default (absent without one is KeyError(path))."""
    key: StashKey[Any] = (
        StashKey[Any](path) if default == "none" else StashKey[Any](path, default=default)
    )
    stash = Stash(DATA)
    snapshot = StashSnapshot(stash.all())
    assert (key in snapshot) == (key in stash)
    if key in stash or key.has_default:
        assert snapshot[key] == stash[key]
        return
    with pytest.raises(KeyError) as from_stash:
        stash[key]
    with pytest.raises(KeyError) as from_snapshot:
        snapshot[key]
    assert from_snapshot.value.args == from_stash.value.args == (path,)


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=3),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab0"), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_snapshot_finds_every_leaf_the_stash_lists(value: Any) -> None:
    """Every leaf path Stash.keys() lists reads the same value through a key on the snapshot."""
    stash = Stash({"root": value})
    snapshot = StashSnapshot(stash.all())
    paths = stash.keys()  # a Stash is not iterable
    for path in paths:
        key = StashKey[Any](path)
        assert key in snapshot
        assert snapshot[key] == stash.get(path)


def test_snapshot_is_still_a_plain_dict() -> None:
    """A snapshot equals dicts, serialises as JSON, reprs as a dict and copies as a snapshot."""
    snapshot = StashSnapshot(DATA)
    assert snapshot == DATA
    assert isinstance(snapshot, dict)
    assert json.loads(json.dumps(snapshot)) == DATA
    assert repr(snapshot) == repr(DATA)
    assert "counts" in snapshot
    assert snapshot.get("text") == "hello"
    with pytest.raises(KeyError):
        snapshot["counts.search"]
    assert type(snapshot.copy()) is dict


def test_a_default_read_is_a_fresh_copy() -> None:
    """An absent path reads a copy of the key's default, as Stash does."""
    tags = StashKey[list[str]]("tags", default=["a"])
    snapshot = StashSnapshot()
    snapshot[tags].append("b")
    assert snapshot[tags] == ["a"]
    assert tags not in snapshot
