"""Artifact bodies by reference, for `SqliteStore` and `PostgresStore` alike.

A durable store keeps the spool key of a body, never the body: a body the store's own spool
already holds is referenced without a copy, a body from another spool is copied into the store's
spool by streaming, and a large body never passes through memory whole (measured with
``tracemalloc`` while storing, loading and querying it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import tracemalloc
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import FileSpoolStore, MemorySpoolStore, SqliteStore
from pipeline.stores._file_spool import FileSpoolReader
from pipeline.testing import ScriptedModel

from .._stores import DurableStore, StoreBackend

MIB = 1 << 20
LINE = "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ {}\n"


@asynccontextmanager
async def opened(backend: StoreBackend, spool: FileSpoolStore) -> AsyncIterator[DurableStore]:
    store = await backend.open(spool=spool)
    try:
        yield store
    finally:
        await store.aclose()


def big_body(megabytes: int) -> Iterator[str]:
    """About ``megabytes`` MiB of numbered lines, generated a chunk at a time."""
    per_chunk = MIB // len(LINE)
    for chunk in range(megabytes):
        yield "".join(LINE.format(chunk * per_chunk + i) for i in range(per_chunk))


def spool_files(spool: FileSpoolStore) -> list[Path]:
    return sorted(spool.directory.glob("*.spool"))


def call_with(artifact: SpooledArtifact, call_id: str = "big") -> ToolCall:
    return ToolCall.completed(id=call_id, tool="fetch", args={}, results=artifact)


async def test_a_large_body_in_the_stores_spool_is_referenced_never_copied_or_loaded(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """A 48 MiB body the runner spooled: stored and queried in well under 8 MiB of memory."""
    spool = FileSpoolStore(tmp_path / "bodies")
    reader = spool.write_chunks("turn-1/big", big_body(48))
    size = reader.byte_length()
    async with opened(durable, spool) as store:
        tracemalloc.start()
        try:
            await store.save_tool_call("conv", "turn-1", call_with(SpooledArtifact(reader)))
            _, [loaded] = await store.load_conversation("conv")
            assert isinstance(loaded.results, SpooledArtifact)
            head, tail = loaded.results.head(2), loaded.results.tail(2)
            count, length = loaded.results.line_count(), loaded.results.byte_length()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB for a {size / MIB:.0f} MiB body"
    assert spool_files(spool) == [spool.path_for("turn-1/big")]  # no copy was made
    last = 48 * (MIB // len(LINE)) - 1
    assert head == [LINE.format(0)[:-1], LINE.format(1)[:-1]]
    assert tail == [LINE.format(last)[:-1], ""]
    assert (count, length) == (reader.line_count(), size)
    if durable.name == "sqlite":
        assert Path(durable.target).stat().st_size < MIB  # the database holds no body


async def test_a_large_body_from_another_spool_is_copied_by_streaming(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """A 48 MiB body from another spool is copied into the store's spool, exact, in chunks."""
    theirs = FileSpoolStore(tmp_path / "runner")
    reader = theirs.write_chunks("turn-1/big", [*big_body(48), b"\xff\xfe not utf-8 \n"])
    spool = FileSpoolStore(tmp_path / "store")
    async with opened(durable, spool) as store:
        tracemalloc.start()
        try:
            await store.save_tool_call(None, "turn-1", call_with(SpooledArtifact(reader)))
            [loaded] = await store.tool_calls_for_turn("turn-1")
            assert isinstance(loaded.results, SpooledArtifact)
            last = loaded.results.tail(2)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB"
    [copy] = spool_files(spool)
    assert copy.read_bytes() == reader.path.read_bytes()  # byte for byte, bad bytes included
    assert last == ["\ufffd\ufffd not utf-8 ", ""]
    theirs.delete("turn-1/big")  # the runner releasing its spool does not touch the copy
    async with opened(durable, spool) as store:
        [again] = await store.tool_calls_for_turn("turn-1")
    assert isinstance(again.results, SpooledArtifact)
    assert again.results.byte_length() == copy.stat().st_size


async def test_replacing_or_deleting_a_call_drops_only_the_bodies_the_store_copied(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """Copies go with their call; a body the runner wrote to the shared spool is never deleted."""
    spool = FileSpoolStore(tmp_path / "bodies")
    other = MemorySpoolStore()
    big = "x" * (64 * 1024)  # over the size kept in the row
    runner_owned = SpooledArtifact(spool.write("t/shared", big + "runner"))
    async with opened(durable, spool) as store:
        await store.save_tool_call("c", "t", call_with(SpooledArtifact(other.write("k", big)), "a"))
        await store.save_tool_call("c", "t", call_with(runner_owned, "shared"))
        assert len(spool_files(spool)) == 2  # the copy of "a" and the runner's own body
        await store.save_tool_call("c", "t", ToolCall.completed(id="a", tool="x", args={},
                                                                results="now text"))
        assert spool_files(spool) == [spool.path_for("t/shared")]
        assert await store.delete_tool_call("c", "t", "shared") is True
        assert spool_files(spool) == [spool.path_for("t/shared")]  # not the store's to delete
        _, calls = await store.load_conversation("c")
    assert [c.results for c in calls] == ["now text"]


async def test_a_body_missing_from_the_spool_loads_as_a_notice_not_an_error(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """A conversation whose spool lost a body still loads; the artifact says the body is gone."""
    spool = FileSpoolStore(tmp_path / "bodies")
    reader = spool.write("t/gone", "y" * 100_000)
    async with opened(durable, spool) as store:
        await store.save_tool_call("c", "t", call_with(SpooledArtifact(reader), "gone"))
        spool.delete("t/gone")
        _, [loaded] = await store.load_conversation("c")
    assert isinstance(loaded.results, SpooledArtifact)
    assert loaded.results.as_string() == "[loopware: the body of spool key 't/gone' is missing]"


async def test_small_in_memory_bodies_stay_in_the_row_and_make_no_files(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """A short artifact body held in memory is kept with its call: no file per small result."""
    spool = FileSpoolStore(tmp_path / "bodies")
    small = SpooledArtifact(MemorySpoolStore().write("t/s", "short body\nof two lines"))
    async with opened(durable, spool) as store:
        await store.save_tool_call("c", "t", call_with(small, "s"))
        _, [loaded] = await store.load_conversation("c")
    assert isinstance(loaded.results, SpooledArtifact)
    assert loaded.results.as_string() == "short body\nof two lines"
    assert loaded.results.line_count() == 2
    assert spool_files(spool) == []


async def test_a_runner_sharing_the_stores_spool_stores_references_only(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """Given the store's spool, a runner's large results are referenced where it wrote them."""
    spool = FileSpoolStore(tmp_path / "bodies")
    body = "line\n" * 50_000

    @tool
    def dump() -> str:
        """Return a long text."""
        return body

    steps = [
        ModelResponse(tool_calls=[ProposedToolCall(id="d", name="dump", arguments="{}")]),
        ModelResponse(text="done"),
    ]
    async with opened(durable, spool) as store:
        runner = TurnRunner(executor=ToolLoopExecutor(ScriptedModel(steps)), tools=[dump],
                            store=store, spool=spool)
        result = await runner.run("go", conversation_id="c")
        _, [loaded] = await store.load_conversation("c")
    assert result.status == "completed", result.errors
    assert spool_files(spool) == [spool.path_for(f"{result.turn_id}/d")]
    assert isinstance(loaded.results, SpooledArtifact)
    assert loaded.results.as_string() == body


async def test_a_version_2_database_with_bodies_in_its_rows_stays_readable(
    tmp_path: Path,
) -> None:
    """Rows written before bodies moved to the spool load back unchanged after the migration.

    The migration streams a large inline body (32 MiB here) out to the spool, with a peak of a
    few MiB of memory; a small one stays in its row.
    """
    path = tmp_path / "v2.db"
    SqliteStore(path).close()
    line = "abcdefghijklmnopqrs\n"
    size = 32 * MIB
    with sqlite3.connect(path) as conn:  # what version 2 wrote: the bodies in the parts' text
        conn.execute("ALTER TABLE tool_call_results DROP COLUMN spool_key")
        for column in ("ran", "decisions", "duration_ms", "validated_checksum"):  # version 4's
            conn.execute(f"ALTER TABLE tool_calls DROP COLUMN {column}")
        conn.execute("ALTER TABLE messages DROP COLUMN provider_state")  # added by version 7
        conn.execute("ALTER TABLE tool_calls DROP COLUMN unparsed_args")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 3")
        conn.execute("DROP TABLE counter_slots")  # version 6's
        conn.execute("DROP TABLE conversations")  # version 8's
        conn.execute("DROP TABLE conversation_counts")
        for call_id in ("small", "large"):
            conn.execute(
                "INSERT INTO tool_calls (scope, conversation_id, turn_id, id, tool, args, checksum,"
                " is_complete, is_error, from_artifact_tool, inline, created_at, updated_at,"
                " completed_at, results_kind, results_text) VALUES ('c:c', 'c', 't', ?, 'x',"
                " '{}', ?, 1, 0, 0, 0, ?, ?, ?, 'artifact', NULL)",
                (call_id, "ab" * 32, *["2025-01-01T00:00:00+00:00"] * 3),
            )
        parts = "INSERT INTO tool_call_results (call_seq, position, kind, artifact_class, text,"
        conn.execute(
            parts + " byte_length, media, data) VALUES (1, 0, 'artifact',"
            " 'pipeline._artifact:SpooledArtifact', 'old body\nsecond line', 20, NULL, NULL)"
        )
        conn.execute(  # made by SQLite itself: 32 MiB of lines, never in this process
            parts + " byte_length, media, data) VALUES (2, 0, 'artifact', 'x:Y',"
            " replace(printf('%.*c', ?, 'x'), ?, ?), ?, NULL, NULL)",
            (size, "x" * len(line), line, size),
        )
    conn.close()
    tracemalloc.start()
    try:
        async with SqliteStore(path) as store:
            _, [small, large] = await store.load_conversation("c")
            assert isinstance(large.results, SpooledArtifact)
            head, count = large.results.head(1), large.results.line_count()
            _, peak = tracemalloc.get_traced_memory()
            assert await store.delete_tool_call("c", "t", "small") is True
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB"
    assert isinstance(small.results, SpooledArtifact)
    assert small.results.as_string() == "old body\nsecond line"
    assert small.results.byte_length() == 20
    assert (head, count) == (["abcdefghijklmnopqrs"], size // len(line) + 1)
    assert large.results.byte_length() == size
    with sqlite3.connect(path) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_migrations")]
        inline = conn.execute("SELECT COUNT(*) FROM tool_call_results WHERE text IS NOT NULL")
        assert inline.fetchone() == (0,)  # the small row was deleted, the large one moved
    conn.close()
    assert versions == [1, 2, 3, 4, 5, 6, 7, 8]
    [moved] = list((tmp_path / "v2.db-spool").glob("*.spool"))
    assert moved.stat().st_size == size


class GatedSpool(FileSpoolStore):
    """Holds the first writer right after its body is written, until `release` is set."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.first_written = threading.Event()
        self.release = threading.Event()

    def write_chunks(self, id: str, chunks: Iterable[str | bytes]) -> FileSpoolReader:
        reader = super().write_chunks(id, chunks)
        if not self.first_written.is_set():
            self.first_written.set()
            self.release.wait(30)
        return reader


async def test_a_call_saved_from_two_stores_at_once_keeps_the_body_of_the_row_that_won(
    durable: StoreBackend, tmp_path: Path
) -> None:
    """Save A copies its body, save B copies and commits, then A commits: A's body survives.

    (Each save copies to a key of its own; with one shared key, B's copy would overwrite A's
    body and the winning row would read the loser's body.)
    """
    spool = GatedSpool(tmp_path / "bodies")
    other = MemorySpoolStore()
    bodies = [f"version {v}\n" + "x" * (40_000 + v) for v in range(2)]

    def save(v: int) -> ToolCall:
        artifact = SpooledArtifact(other.write(str(v), bodies[v]))
        return ToolCall.completed(id="same", tool="fetch", args={"v": v}, results=artifact)

    async with opened(durable, spool) as one, opened(durable, spool) as two:
        first = asyncio.create_task(one.save_tool_call("c", "t", save(0)))
        await asyncio.to_thread(spool.first_written.wait, 30)  # A's body is in the spool
        await two.save_tool_call("c", "t", save(1))  # B copies and commits
        spool.release.set()
        await first  # A commits last: its row wins
        _, [loaded] = await one.load_conversation("c")
    assert loaded.args == {"v": 0}
    assert isinstance(loaded.results, SpooledArtifact)
    assert loaded.results.as_string() == bodies[0]
    assert len(spool_files(spool)) == 1  # B's copy went with B's row
