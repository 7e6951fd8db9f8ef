"""`SqliteStore` specifics: faithful round trips, schema, errors, durability and load."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pipeline import tool
from pipeline.artifacts import (
    Media,
    SpooledArtifact,
    SpooledJsonArtifact,
    SpooledMarkdownArtifact,
)
from pipeline.calls import ToolCall
from pipeline.errors import InvalidRunnerConfigError
from pipeline.stores import MemorySpoolStore, SqliteStore

ROOT = Path(__file__).resolve().parents[2]
SPOOL = MemorySpoolStore()


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


def test_schema_is_versioned_and_uses_wal(tmp_path: Path) -> None:
    """A new database records each schema version in its migration table and runs in WAL mode."""
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    SqliteStore(path).close()  # reopening applies nothing twice
    with sqlite3.connect(path) as conn:
        versions = conn.execute("SELECT version FROM schema_migrations").fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert versions == [(1,), (2,), (3,), (4,), (5,), (6,), (7,), (8,)]
    assert mode == "wal"


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database migrated by a newer loopware raises InvalidRunnerConfigError, untouched."""
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'future')")
    with pytest.raises(InvalidRunnerConfigError, match="schema version 99"):
        SqliteStore(path)


async def test_parts_stored_under_the_old_class_paths_read_back_as_their_class(
    tmp_path: Path,
) -> None:
    """Results stored when the built-in artifact classes reported module ``pipeline`` (schema 4)
    read back as their own classes once the store has migrated the database."""
    path = tmp_path / "v4.db"
    classes = [SpooledJsonArtifact, SpooledMarkdownArtifact, SpooledArtifact]
    async with SqliteStore(path) as store:
        for position, cls in enumerate(classes):
            call = ToolCall.completed(
                id=f"c{position}", tool="x", args={}, results=artifact(cls, "{}")
            )
            await store.save_tool_call("conv", "t", call)
    with sqlite3.connect(path) as conn:  # what schema 4 wrote
        conn.execute(
            "UPDATE tool_call_results SET artifact_class ="
            " replace(artifact_class, 'pipeline.artifacts:', 'pipeline:')"
        )
        conn.execute("DROP TABLE counter_slots")  # added by version 6
        conn.execute("ALTER TABLE messages DROP COLUMN provider_state")  # added by version 7
        conn.execute("ALTER TABLE tool_calls DROP COLUMN unparsed_args")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 5")
        conn.execute("DROP TABLE conversations")  # version 8's
        conn.execute("DROP TABLE conversation_counts")
    conn.close()
    async with SqliteStore(path) as store:
        _, calls = await store.load_conversation("conv")
    assert [type(call.results) for call in calls] == classes


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    """Opening a non-SQLite file raises InvalidRunnerConfigError naming the path."""
    path = tmp_path / "notes.txt"
    path.write_text("hello, I am not a database" * 100)
    with pytest.raises(InvalidRunnerConfigError, match=r"notes\.txt") as info:
        SqliteStore(path)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"path": ""}, "path"),
        ({"path": 7}, "path"),
        ({"path": "x.db", "synchronous": "off"}, "synchronous"),
        ({"path": "x.db", "busy_timeout": -1}, "busy_timeout"),
        ({"path": "x.db", "busy_timeout": True}, "busy_timeout"),
    ],
    ids=["empty-path", "int-path", "bad-synchronous", "negative-timeout", "bool-timeout"],
)
def test_bad_options_raise_invalid_runner_config(kwargs: dict[str, object], problem: str) -> None:
    """Each bad option is named in an InvalidRunnerConfigError."""
    with pytest.raises(InvalidRunnerConfigError, match=problem):
        SqliteStore(**kwargs)  # type: ignore[arg-type]


async def test_closed_store_refuses_work(tmp_path: Path) -> None:
    """After the async context manager exits, every operation raises ProgrammingError."""
    async with SqliteStore(tmp_path / "s.db") as store:
        call = ToolCall.completed(id="a", tool="x", args={}, results="")
        await store.save_tool_call(None, "t", call)
    assert "closed" in repr(store)
    with pytest.raises(sqlite3.ProgrammingError):
        await store.tool_calls_for_turn("t")
    store.close()  # idempotent


async def test_the_default_spool_directory_appears_with_the_first_spooled_body(
    tmp_path: Path,
) -> None:
    """Text results make no spool directory; a large artifact body goes to ``<path>-spool``."""
    path = tmp_path / "s.db"
    spool_dir = tmp_path / "s.db-spool"
    async with SqliteStore(path) as store:
        await store.save_tool_call("c", "t", ToolCall.completed(id="a", tool="x", args={},
                                                                results="text"))
        await store.load_conversation("c")
        assert not spool_dir.exists()
        body = "z" * 100_000
        big = SpooledArtifact(MemorySpoolStore().write("k", body))
        await store.save_tool_call("c", "t", ToolCall.completed(id="b", tool="x", args={},
                                                                results=big))
        assert len(list(spool_dir.iterdir())) == 1
    async with SqliteStore(path) as store:
        _, calls = await store.load_conversation("c")
    assert isinstance(calls[1].results, SpooledArtifact)
    assert calls[1].results.as_string() == body


async def test_an_in_memory_database_keeps_bodies_in_memory() -> None:
    """``":memory:"`` needs no directory: its spool is in memory too."""
    async with SqliteStore(":memory:") as store:
        body = "y" * 100_000
        big = SpooledArtifact(MemorySpoolStore().write("k", body))
        await store.save_tool_call(None, "t", ToolCall.completed(id="b", tool="x", args={},
                                                                 results=big))
        [call] = await store.tool_calls_for_turn("t")
        assert isinstance(store.spool, MemorySpoolStore)
    assert isinstance(call.results, SpooledArtifact)
    assert call.results.as_string() == body


_OPENER = """
import os, sys, time
path, go = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.001)
from pipeline.stores import SqliteStore
SqliteStore(path, synchronous="normal").close()
"""


def test_processes_opening_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """Two workers started together on a new database file: none fails with "database is
    locked" (switching the file to WAL waits for the one creating the schema)."""
    import os
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    for attempt in range(8):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        go = folder / "go"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPENER, str(folder / "turns.db"), str(go)],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        time.sleep(0.6)  # every process imports and waits for the gun
        go.touch()
        errors = [proc.communicate(timeout=60)[1] for proc in procs]
        failed = [err[-2000:] for proc, err in zip(procs, errors, strict=True) if proc.returncode]
        assert not failed, failed
