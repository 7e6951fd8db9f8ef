"""The durable stores' shared suite: `SqliteStore` and `PostgresStore` pass the same tests.

The `durable` fixture (``tests/pipeline/conftest.py``) runs every test against an SQLite file
and a fresh PostgreSQL database (a throw-away server, ``tests/_pg.py``): faithful round trips,
turns kept without a conversation, many stores on one database, a process killed after a
store, load, tampered rows. Artifact bodies by reference are pinned in ``test_store_bodies.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import Media, SpooledArtifact, SpooledJsonArtifact, SpooledMarkdownArtifact
from pipeline.calls import ToolCall
from pipeline.models import Message, ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stores import MemorySpoolStore, TurnRecord
from pipeline.testing import ScriptedModel

from .._stores import DurableStore, StoreBackend

ROOT = Path(__file__).resolve().parents[2]
SPOOL = MemorySpoolStore()


@asynccontextmanager
async def opened(backend: StoreBackend) -> AsyncIterator[DurableStore]:
    store = await backend.open()
    try:
        yield store
    finally:
        await store.aclose()


def artifact(cls: type[SpooledArtifact], body: str) -> SpooledArtifact:
    return cls(SPOOL.write(f"body-{len(SPOOL)}", body))


def media(name: str, data: bytes) -> Media:
    return Media.tool_generated("image", "image/png", name, data, source="https://example.test")


def text_of(call: ToolCall) -> str:
    results = call.results
    return results.as_string() if isinstance(results, SpooledArtifact) else str(results)


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@pytest.mark.parametrize(
    "results",
    [
        "plain text ✓",
        artifact(SpooledArtifact, "line 1\nline 2\n"),
        artifact(SpooledJsonArtifact, '{"rows": [1, 2, 3]}'),
        artifact(SpooledMarkdownArtifact, "# Title\n\nbody\n"),
        media("a.png", b"\x89PNG\x00\xff"),
        (media("a.png", b"one"), media("b.png", b"two")),
        (artifact(SpooledArtifact, "a"), artifact(SpooledJsonArtifact, "[1]")),
    ],
    ids=["text", "artifact", "json-artifact", "md-artifact", "media", "media-tuple", "artifacts"],
)
async def test_every_result_shape_round_trips(durable: StoreBackend, results: object) -> None:
    """A stored call loads back with the same fields and an equivalent result of the same class."""
    now = datetime.now(UTC)
    original = ToolCall(
        id="call-1",
        tool="fetch",
        args={"url": "https://example.test/ü", "n": 1.5, "deep": {"b": [1, None, True], "a": 0}},
        checksum="ab" * 32,
        is_complete=True,
        is_error=True,
        results=results,  # type: ignore[arg-type]
        from_artifact_tool=True,
        inline=True,
        created_at=now - timedelta(seconds=2),
        updated_at=now - timedelta(seconds=1),
        completed_at=now.astimezone(),
    )
    async with opened(durable) as store:
        await store.save_tool_call(None, "turn-1", original)
        [loaded] = await store.tool_calls_for_turn("turn-1")
    for name in ("id", "tool", "args", "checksum", "is_complete", "is_error", "from_artifact_tool",
                 "inline", "created_at", "updated_at", "completed_at"):
        assert getattr(loaded, name) == getattr(original, name), name
    assert list(loaded.args) == ["url", "n", "deep"]  # key order kept
    assert isinstance(loaded.args["n"], float)
    expected = original.results if isinstance(original.results, tuple) else (original.results,)
    got = loaded.results if isinstance(loaded.results, tuple) else (loaded.results,)
    assert type(loaded.results) is type(original.results)
    for want, have in zip(expected, got, strict=True):
        assert type(have) is type(want)
        if isinstance(want, SpooledArtifact):
            assert isinstance(have, SpooledArtifact)
            assert have.as_string() == want.as_string()
            assert have.byte_length() == want.byte_length()
        elif isinstance(want, Media):
            assert isinstance(have, Media)
            assert (have.kind, have.mime_type, have.filename, have.trust_tier, have.id) == (
                want.kind, want.mime_type, want.filename, want.trust_tier, want.id
            )
            assert (have.modality_hazard, have.source) == (want.modality_hazard, want.source)
            assert have.read_bytes() == want.read_bytes()
        else:
            assert have == want


async def test_reader_backed_media_is_stored_with_its_bytes(durable: StoreBackend) -> None:
    """A Media given as a reader is stored with the bytes the reader returns."""
    lazy = Media(kind="document", mime_type="text/plain", filename="n.txt",
                 trust_tier="third-party-public", modality_hazard="extractable-instructions",
                 reader=lambda: b"read later")
    async with opened(durable) as store:
        await store.save_tool_call(None, "t", ToolCall.completed(id="m", tool="x", args={},
                                                                 results=lazy))
        [loaded] = await store.tool_calls_for_turn("t")
    assert isinstance(loaded.results, Media)
    assert loaded.results.data == b"read later"


async def test_unknown_artifact_class_loads_as_base_artifact(durable: StoreBackend) -> None:
    """An artifact whose class can no longer be imported loads as a SpooledArtifact."""
    async with opened(durable) as store:
        call = ToolCall.completed(id="a", tool="x", args={}, results=artifact(SpooledArtifact, "z"))
        await store.save_tool_call(None, "t", call)
    durable.sql("UPDATE tool_call_results SET artifact_class = 'gone.module:Vanished'")
    async with opened(durable) as store:
        [loaded] = await store.tool_calls_for_turn("t")
    assert type(loaded.results) is SpooledArtifact
    assert loaded.results.as_string() == "z"


async def test_runner_turn_without_conversation_is_stored_by_turn(durable: StoreBackend) -> None:
    """A turn run without conversation keeps its calls, messages and record under its turn id."""
    proposed = ProposedToolCall(id="c1", name="echo", arguments='{"text":"a"}')
    steps = [ModelResponse(tool_calls=[proposed]), ModelResponse(text="all done")]
    async with opened(durable) as store:
        runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[echo],
                            store=store)
        result = await runner.run("go")
        calls = await store.tool_calls_for_turn(result.turn_id)
        messages = await store.messages_for_turn(result.turn_id)
        record = await store.turn(result.turn_id)
        assert await store.turn("nope") is None
    [stored] = calls
    [made] = result.tool_calls
    assert (stored.id, stored.checksum, stored.inline) == (made.id, made.checksum, made.inline)
    assert stored.results == made.results == "a"  # a small result is kept inline, as text
    assert [m.content for m in messages] == ["go", "", "all done"]
    assert isinstance(record, TurnRecord)
    assert (record.status, record.output, record.input, record.iterations) == (
        "completed", "all done", "go", result.iterations
    )


async def test_calls_with_the_same_id_in_different_turns_are_kept_apart(
    durable: StoreBackend,
) -> None:
    """Without a conversation, call ids are scoped to their turn: nothing is overwritten."""
    async with opened(durable) as store:
        for turn in ("t1", "t2"):
            await store.save_tool_call(None, turn, ToolCall.completed(id="same", tool="x", args={},
                                                                      results=turn))
        assert [c.results for c in await store.tool_calls_for_turn("t1")] == ["t1"]
        assert [c.results for c in await store.tool_calls_for_turn("t2")] == ["t2"]
        assert await store.delete_tool_call(None, "t1", "same") is True
        assert await store.tool_calls_for_turn("t1") == []
        assert len(await store.tool_calls_for_turn("t2")) == 1


async def test_two_stores_on_one_database_do_not_lock_each_other_out(
    durable: StoreBackend,
) -> None:
    """Two stores (two connections) writing the same database concurrently both succeed."""
    async with opened(durable) as one, opened(durable) as two:
        await asyncio.gather(*(
            store.save_tool_call(None, f"t{i % 7}", ToolCall.completed(
                id=f"c{i}", tool="x", args={"i": i}, results="r"))
            for i, store in enumerate([one, two] * 100)
        ))
    assert durable.sql("SELECT COUNT(*) FROM tool_calls") == [(200,)]


_CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from pipeline import ToolLoopExecutor, TurnRunner, tool
    from pipeline.events import ToolCallStored
    from pipeline.models import ModelResponse, ProposedToolCall
    from pipeline.stores import SqliteStore
    from pipeline.stores import FileSpoolStore, PostgresStore
    from pipeline.testing import ScriptedModel

    @tool
    def echo(text: str) -> str:
        "Return the text."
        return text

    stored = 0

    def on_stored(event: ToolCallStored) -> None:
        global stored
        stored += 1
        if stored == 3:  # the third store_tool_call has returned: die without any cleanup
            print(event.turn_id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    async def main() -> None:
        calls = [ProposedToolCall(id=f"c{i}", name="echo", arguments=f'{{"text": "n{i}"}}')
                 for i in range(5)]
        runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel([ModelResponse(
            tool_calls=calls)])), tools=[echo], store=OPEN)
        runner.on(ToolCallStored, on_stored)
        await runner.run("go")
        print("survived", flush=True)

    asyncio.run(main())
    """
)


async def test_calls_survive_a_sigkill_right_after_the_third_store(durable: StoreBackend) -> None:
    """A child killed right after its third store_tool_call leaves three intact calls behind."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = _CHILD.replace("OPEN", durable.child_opener())
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, durable.target, str(durable.spool_dir), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = await child.communicate()
    assert child.returncode == -signal.SIGKILL, err.decode()
    turn_id = out.decode().strip()
    assert turn_id.startswith("turn_")
    if durable.name == "sqlite":
        assert durable.sql("PRAGMA integrity_check") == [("ok",)]
    async with opened(durable) as store:
        calls = await store.tool_calls_for_turn(turn_id)
    assert [c.id for c in calls] == ["c0", "c1", "c2"]
    assert [text_of(c) for c in calls] == ["n0", "n1", "n2"]
    assert all(c.is_complete and not c.is_error for c in calls)


class _PerTurnModel:
    """Proposes three echo calls per turn (ids derived from the turn's input), then answers."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = len(request.tool_calls)
        if done == 3:
            return ModelResponse(text="ok")
        key = request.messages[0].content
        arguments = json.dumps({"text": f"{key}:{done}"})
        return ModelResponse(
            tool_calls=[ProposedToolCall(id=f"{key}-{done}", name="echo", arguments=arguments)]
        )


async def test_500_concurrent_turns_store_every_call_exactly_once(durable: StoreBackend) -> None:
    """500 concurrent turns on one store complete; each of their 1500 calls is stored once."""
    async with opened(durable) as store:
        runner = TurnRunner(executor=ToolLoopExecutor(_PerTurnModel()), tools=[echo], store=store)
        results = await asyncio.gather(*(runner.run(f"u{i}") for i in range(500)))
        stored = {r.turn_id: await store.tool_calls_for_turn(r.turn_id) for r in results}
        records = [await store.turn(r.turn_id) for r in results]
    assert {r.status for r in results} == {"completed"}
    assert [e for r in results for e in r.errors] == []
    assert sum(len(calls) for calls in stored.values()) == 1500
    for result in results:
        key = result.messages[0].content
        calls = stored[result.turn_id]
        assert [c.id for c in calls] == [f"{key}-{n}" for n in range(3)]
        assert [text_of(c) for c in calls] == [f"{key}:{n}" for n in range(3)]
    assert durable.sql("SELECT COUNT(*) FROM tool_calls") == [(1500,)]
    assert all(r is not None and r.status == "completed" for r in records)
    assert durable.sql("SELECT COUNT(*) FROM turns WHERE status = 'completed'") == [(500,)]


async def test_save_turn_replaces_the_record(durable: StoreBackend) -> None:
    """Saving a turn record twice keeps the latest version."""
    now = datetime.now(UTC)
    record = TurnRecord(turn_id="t", conversation_id="c", status="failed", input="in",
                        output=None, iterations=2, error_code="E_X", error_message="bad",
                        started_at=now, ended_at=now)
    async with opened(durable) as store:
        await store.save_turn(record)
        await store.save_message("c", "t", Message(role="user", content="in"))
        again = TurnRecord(**{**{f: getattr(record, f) for f in TurnRecord.__dataclass_fields__},
                              "status": "completed", "output": "out"})
        await store.save_turn(again)
        assert await store.turn("t") == again


@tool
def list_dir(pattern: str) -> str:
    """List a directory whose file names are not valid UTF-8 (decoded with surrogateescape)."""
    return b"report-\xff.txt\nnotes.md".decode("utf-8", "surrogateescape")


async def test_lone_surrogates_are_stored_and_load_back_unchanged(durable: StoreBackend) -> None:
    """Text holding lone surrogates (undecodable file names) is stored, never a failed turn."""
    odd = "go \udcff"
    proposed = ProposedToolCall(id="c\udc80", name="list_dir", arguments='{"pattern": "\\ud800"}')
    steps = [ModelResponse(tool_calls=[proposed]), ModelResponse(text=f"saw {odd}")]
    async with opened(durable) as store:
        runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[list_dir],
                            store=store)
        result = await runner.run(odd, conversation_id="conv-\udcfe")
        messages, calls = await store.load_conversation("conv-\udcfe")
        record = await store.turn(result.turn_id)
        [made] = result.tool_calls
        [stored] = calls
        assert text_of(stored) == text_of(made) == "report-\udcff.txt\nnotes.md"
        assert await store.delete_tool_call("conv-\udcfe", result.turn_id, "c\udc80") is True
    assert result.status == "completed", result.errors
    assert (stored.id, stored.args, stored.checksum) == (made.id, made.args, made.checksum)
    assert [m.content for m in messages] == [odd, "", f"saw {odd}"]
    assert messages[1].tool_call_ids == ("c\udc80",)
    assert record is not None
    assert (record.input, record.output) == (odd, f"saw {odd}")
    assert record.conversation_id == "conv-\udcfe"


async def test_replacing_an_artifact_call_replaces_its_stored_parts(durable: StoreBackend) -> None:
    """Saving a call again by id (mutate_tool_call) swaps its artifact parts, position kept."""
    first = ToolCall.completed(id="a", tool="x", args={}, results=artifact(SpooledArtifact, "v1"))
    other = ToolCall.completed(id="b", tool="x", args={}, results="b")
    second = ToolCall.completed(
        id="a", tool="x", args={},
        results=(artifact(SpooledArtifact, "v2"), artifact(SpooledJsonArtifact, "[2]")),
    )
    async with opened(durable) as store:
        for call in (first, other, second):
            await store.save_tool_call(None, "t", call)
        loaded = await store.tool_calls_for_turn("t")
    assert [c.id for c in loaded] == ["a", "b"]
    parts = loaded[0].results
    assert isinstance(parts, tuple)
    assert [type(p) for p in parts] == [SpooledArtifact, SpooledJsonArtifact]
    assert [p.as_string() for p in parts if isinstance(p, SpooledArtifact)] == ["v2", "[2]"]


class NeedsTwoParts(SpooledArtifact):
    """An artifact class whose constructor needs more than a reader."""

    __slots__ = ("label",)

    def __init__(self, reader: object, label: str) -> None:
        super().__init__(reader)  # type: ignore[arg-type]
        self.label = label


async def test_artifact_class_that_needs_more_than_a_reader_loads_as_base(
    durable: StoreBackend,
) -> None:
    """A stored artifact whose class cannot be rebuilt from a reader loads as SpooledArtifact."""
    made = NeedsTwoParts(SPOOL.write("two-parts", "body"), "x")
    async with opened(durable) as store:
        await store.save_tool_call(None, "t", ToolCall.completed(id="a", tool="x", args={},
                                                                 results=made))
        [loaded] = await store.tool_calls_for_turn("t")
    assert type(loaded.results) is SpooledArtifact
    assert loaded.results.as_string() == "body"


async def test_loading_never_imports_a_module_named_in_the_database(durable: StoreBackend) -> None:
    """An artifact class path naming an unimported module loads as the base class, unimported."""
    from pipeline.testing import make_dispatch_context

    reader = make_dispatch_context().spool.write("x", "body")
    call = ToolCall.completed(id="c1", tool="t", args={}, results=SpooledArtifact(reader))
    async with opened(durable) as store:
        await store.save_tool_call("conv", "turn", call)
    changed = durable.sql("UPDATE tool_call_results SET artifact_class = 'this:Fly' RETURNING 1")
    assert changed == [(1,)]
    sys.modules.pop("this", None)
    async with opened(durable) as reopened:
        _, calls = await reopened.load_conversation("conv")
    assert "this" not in sys.modules  # importing it would print the Zen of Python
    assert type(calls[0].results) is SpooledArtifact
    assert calls[0].results.as_string() == "body"


ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=30)
"""Any code points: NUL, lone surrogates, astral characters included."""


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=ANY_TEXT, key=ANY_TEXT.filter(bool))
def test_any_text_is_stored_and_loaded_back_exactly(
    durable: StoreBackend, text: str, key: str
) -> None:
    """Ids, arguments, contents and results of any text round trip unchanged (NUL included)."""
    message = Message(role="user", content=text)
    call = ToolCall.completed(id=key, tool=key, args={"t": text, key: [text, None]}, results=text)

    async def go() -> tuple[list[Message], list[ToolCall], list[ToolCall]]:
        async with opened(durable) as store:
            await store.save_message(key, key, message)
            await store.save_tool_call(key, key, call)
            messages, calls = await store.load_conversation(key)
            by_turn = await store.tool_calls_for_turn(key)
        return list(messages), list(calls), by_turn

    messages, calls, by_turn = asyncio.run(go())
    assert messages[-1] == message
    [stored] = [c for c in calls if c.id == key]
    assert (stored.tool, stored.args, stored.results, stored.checksum) == (
        key, call.args, text, call.checksum
    )
    assert list(stored.args) == list(call.args)
    assert [c.id for c in by_turn] == [key]
