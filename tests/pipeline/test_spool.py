"""Spool stores and readers: line semantics, both stores, streaming file access."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.stores._file_spool as file_spool
from pipeline.errors import InvalidRunnerConfigError
from pipeline.stores import FileSpoolStore, MemorySpoolStore, SpoolReader, SpoolStore

STORES = ["memory", "file"]


def make_store(kind: str, tmp_path: Path) -> MemorySpoolStore | FileSpoolStore:
    return MemorySpoolStore() if kind == "memory" else FileSpoolStore(tmp_path / "spool")


@pytest.fixture(params=STORES, ids=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MemorySpoolStore | FileSpoolStore:
    """Each spool store, empty."""
    return make_store(request.param, tmp_path)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shrink the file reader's blocks so tiny bodies span many blocks."""
    monkeypatch.setattr(file_spool, "_BLOCK", 4)
    monkeypatch.setattr(file_spool, "_READ", 16)
    return


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", [""]),
        ("a", ["a"]),
        ("a\n", ["a", ""]),
        ("a\nb", ["a", "b"]),
        ("\n\n", ["", "", ""]),
        ("a\r\nb\r", ["a\r", "b\r"]),
        ("é\n漢字\n", ["é", "漢字", ""]),
    ],
    ids=["empty", "one", "trailing-newline", "two", "blank-lines", "cr-kept", "unicode"],
)
def test_lines_split_on_newline_only(store: SpoolStore, text: str, lines: list[str]) -> None:
    """Lines split on \\n only, a trailing newline gives a final empty line, \\r is kept."""
    reader = store.write("c1", text)
    assert reader.line_count() == len(lines)
    assert [reader.line(i) for i in range(len(lines))] == lines
    assert reader.read_all() == text


def test_stores_satisfy_the_protocols(store: SpoolStore) -> None:
    """Both stores and their readers satisfy the runtime-checkable protocols."""
    assert isinstance(store, SpoolStore)
    assert isinstance(store.write("x", "y"), SpoolReader)


def test_byte_length_counts_utf8_bytes(store: SpoolStore) -> None:
    """byte_length is the size of the UTF-8 body, not the number of characters."""
    assert store.write("a", "abc").byte_length() == 3
    assert store.write("b", "é漢").byte_length() == 5
    assert store.write("c", b"\x00\xff").byte_length() == 2


def test_invalid_utf8_bytes_read_back_with_replacement(store: SpoolStore) -> None:
    """Bytes are decoded as UTF-8 with errors='replace', line by line and whole."""
    reader = store.write("c1", b"ok\n\xff\xfebad\n\xe2\x82")
    assert reader.read_all() == "ok\n\ufffd\ufffdbad\n\ufffd"
    assert reader.line(1) == "\ufffd\ufffdbad"
    assert reader.line(2) == "\ufffd"
    assert reader.byte_length() == 11


@pytest.mark.parametrize("index", [-1, 3, 100], ids=["negative", "just-past", "far-past"])
def test_line_out_of_range_raises_index_error(store: SpoolStore, index: int) -> None:
    """line(i) outside [0, line_count) raises IndexError."""
    reader = store.write("c1", "a\nb\nc")
    with pytest.raises(IndexError):
        reader.line(index)


def test_read_write_delete_round_trip(store: SpoolStore) -> None:
    """write replaces, read finds or returns None, delete reports whether a body existed."""
    assert store.read("c1") is None
    store.write("c1", "first")
    store.write("c1", "second")
    reader = store.read("c1")
    assert reader is not None
    assert reader.read_all() == "second"
    assert store.delete("c1") is True
    assert store.delete("c1") is False
    assert store.read("c1") is None


def test_file_store_read_sees_a_body_removed_behind_its_back(tmp_path: Path) -> None:
    """A body whose file was deleted outside the store reads as None, not a stale reader."""
    store = FileSpoolStore(tmp_path)
    store.write("c1", "body")
    store.path_for("c1").unlink()
    assert store.read("c1") is None
    assert "c1" not in store


def test_file_store_refuses_a_directory_it_cannot_use(tmp_path: Path) -> None:
    """A file in the way of the directory, or a non-path, raises InvalidRunnerConfigError."""
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a directory")
    for bad in (blocker, blocker / "below", "", 42):
        with pytest.raises(InvalidRunnerConfigError, match="FileSpoolStore"):
            FileSpoolStore(bad)  # type: ignore[arg-type]


def test_write_rejects_non_text_data(store: SpoolStore) -> None:
    """Data that is neither str nor bytes is refused with TypeError and nothing is stored."""
    with pytest.raises(TypeError, match="str or bytes"):
        store.write("c1", 42)  # type: ignore[arg-type]
    assert store.read("c1") is None


@pytest.mark.parametrize("call_id", ["../escape", "a/b\\c", "", "x" * 500, "\x00nul"],
                         ids=["dotdot", "separators", "empty", "long", "nul"])
def test_file_store_accepts_any_id_inside_its_directory(tmp_path: Path, call_id: str) -> None:
    """Any call id maps to a file inside the store's directory."""
    store = FileSpoolStore(tmp_path / "spool")
    store.write(call_id, "body")
    assert store.path_for(call_id).parent == tmp_path / "spool"
    assert [p.name for p in (tmp_path / "spool").iterdir()] == [store.path_for(call_id).name]
    assert call_id in store
    reopened = FileSpoolStore(tmp_path / "spool").read(call_id)
    assert reopened is not None
    assert reopened.read_all() == "body"


def test_file_store_write_chunks_streams_and_leaves_no_temp_files(tmp_path: Path) -> None:
    """write_chunks concatenates str and bytes chunks; a failed write leaves nothing behind."""
    store = FileSpoolStore(tmp_path)
    parts: list[str | bytes] = ["a\n", b"b\n", "c"]
    reader = store.write_chunks("c1", iter(parts))
    assert reader.read_all() == "a\nb\nc"

    def broken() -> Iterator[str]:
        yield "partial"
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError):
        store.write_chunks("c2", broken())
    assert store.read("c2") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [store.path_for("c1").name]


@pytest.mark.usefixtures("small_blocks")
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(alphabet="ab\n\r é", max_size=60),
    start=st.integers(0, 25),
    end=st.none() | st.integers(0, 25),
    n=st.integers(0, 25),
)
def test_file_reader_matches_list_semantics(
    tmp_path: Path, text: str, start: int, end: int | None, n: int
) -> None:
    """The file reader's line, iter_lines and tail_lines agree with str.split over many blocks."""
    reader = FileSpoolStore(tmp_path).write("c", text)
    memory = MemorySpoolStore().write("c", text)
    lines = text.split("\n")
    assert reader.line_count() == memory.line_count() == len(lines)
    assert [reader.line(i) for i in range(len(lines))] == lines
    assert list(reader.iter_lines(start, end)) == lines[start:end]
    assert list(memory.iter_lines(start, end)) == lines[start:end]
    batched = [line for batch in reader.iter_line_batches(start) for line in batch]
    assert batched == lines[start:]
    assert reader.tail_lines(n) == memory.tail_lines(n) == (lines[-n:] if n else [])
    assert reader.byte_length() == memory.byte_length() == len(text.encode())


def test_file_reader_answers_line_queries_without_loading_the_body(tmp_path: Path) -> None:
    """head, tail, line(i) and line_count on an 8 MB file stay far below the body's size."""
    store = FileSpoolStore(tmp_path)
    line = "x" * 79 + "\n"
    reader = store.write_chunks("big", (line * 1000 for _ in range(100)))
    assert reader.byte_length() == 8_000_000
    tracemalloc.start()
    try:
        first = list(reader.iter_lines(0, 3))
        last = reader.tail_lines(2)
        count = reader.line_count()
        middle = reader.line(54_321)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first == ["x" * 79] * 3
    assert last == ["x" * 79, ""]
    assert count == 100_001
    assert middle == "x" * 79
    assert peak < 2_000_000


def test_memory_store_repr_and_len() -> None:
    """MemorySpoolStore reports how many bodies it holds."""
    store = MemorySpoolStore()
    store.write("a", "1")
    store.write("b", b"2")
    assert len(store) == 2
    assert "a" in store
    assert repr(store) == "MemorySpoolStore(2 bodies)"
