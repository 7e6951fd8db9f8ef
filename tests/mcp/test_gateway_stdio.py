"""The gateway's thread-free stdin (loopware_cli/_gateway_stdio.py): lines split as the bytes
arrive, whatever the chunk boundaries, huge lines whole, an oversized one dropped; the fast
lane's tap takes its lines in the read callback and the SDK reads the rest in order; reading
pauses while the SDK lags behind."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopware_cli._gateway_stdio import _QUEUED, _Lines


class Pipe:
    """A read transport double: records pausing and resuming."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")


class Tap:
    """Takes the lines that start with ``take``."""

    def __init__(self) -> None:
        self.taken: list[bytes] = []

    def take(self, line: bytes) -> bool:
        if line.startswith(b"take"):
            self.taken.append(line)
            return True
        return False

    def sent(self, data: bytes) -> None:
        pass


def fed(chunks: list[bytes], limit: int = 1024, tap: Any = None) -> _Lines:
    lines = _Lines(limit)
    lines.connection_made(Pipe())  # type: ignore[arg-type]
    lines.tap = tap
    for chunk in chunks:
        lines.data_received(chunk)
    lines.eof_received()
    return lines


async def read(lines: _Lines) -> list[str]:
    return [line async for line in lines]


async def test_lines_are_read_whole_and_decoded() -> None:
    lines = fed([b'{"a": 1}\n{"b": "\xc3\xa9"}\n'])
    assert await read(lines) == ['{"a": 1}\n', '{"b": "é"}\n']


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_lines_are_the_same_whatever_the_chunk_boundaries(
    texts: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(t + b"\n" for t in texts)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    got = asyncio.run(read(fed(chunks)))
    assert got == [(t + b"\n").decode("utf-8", "replace") for t in texts]


async def test_a_huge_line_arriving_in_many_chunks_is_one_line() -> None:
    line = b'{"text": "' + b"x" * (20 * 1024 * 1024) + b'"}\n'
    chunks = [line[i : i + 65536] for i in range(0, len(line), 65536)]
    got = await read(fed([b"first\n", *chunks, b"last\n"], limit=64 * 1024 * 1024))
    assert len(got) == 3
    assert got[1] == line.decode()
    assert got[2] == "last\n"


async def test_a_line_over_the_limit_is_dropped_and_reading_goes_on() -> None:
    for chunks in ([b"x" * 100 + b'\n{"ok": true}\n'], [b"x" * 10, b"x" * 90, b'\n{"ok": true}\n']):
        lines = await read(fed(chunks, limit=16))
        assert lines == ["(a request too long to read)\n", '{"ok": true}\n']


async def test_a_last_line_without_a_newline_is_still_a_line() -> None:
    assert await read(fed([b"one\ntw", b"o"])) == ["one\n", "two"]


async def test_the_tap_takes_its_lines_as_they_arrive_and_the_sdk_reads_the_rest() -> None:
    tap = Tap()
    lines = _Lines()
    lines.connection_made(Pipe())  # type: ignore[arg-type]
    lines.tap = tap
    lines.data_received(b"sdk 1\ntake 2\nsd")
    assert tap.taken == [b"take 2\n"]  # before anything reads the lines
    lines.data_received(b"k 3\ntake 4\n")
    lines.eof_received()
    assert tap.taken == [b"take 2\n", b"take 4\n"]
    assert await read(lines) == ["sdk 1\n", "sdk 3\n"]


async def test_reading_pauses_while_the_sdk_lags_and_resumes_once_it_catches_up() -> None:
    pipe = Pipe()
    lines = _Lines()
    lines.connection_made(pipe)  # type: ignore[arg-type]
    lines.data_received(b"line\n" * (_QUEUED + 1))
    assert pipe.calls == ["pause"]
    for _ in range(_QUEUED // 2):
        await anext(lines)
    assert pipe.calls == ["pause"]
    await anext(lines)
    assert pipe.calls == ["pause", "resume"]
