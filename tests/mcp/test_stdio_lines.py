"""The stdio transport's reading of a server's output (pipeline/mcp/_stdio.py): lines split in
the read callback whatever the chunk boundaries, a huge line joined once, blank lines and a
partial last line dropped, the rest handed on in order; reading pauses while the SDK's client
lags."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

pytest.importorskip("mcp")

from hypothesis import given
from hypothesis import strategies as st

from pipeline.mcp._stdio import _QUEUED, _ServerOutput


class Pipes:
    """The process transport double: its output pipe records pausing and resuming."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        pipes = self

        class OutputPipe(asyncio.ReadTransport):
            def pause_reading(self) -> None:
                pipes.calls.append("pause")

            def resume_reading(self) -> None:
                pipes.calls.append("resume")

        self.output = OutputPipe()

    def get_pipe_transport(self, fd: int) -> Any:
        return self.output if fd == 1 else None


def output() -> tuple[_ServerOutput, Pipes]:
    protocol = _ServerOutput(asyncio.get_running_loop())
    pipes = Pipes()
    protocol._pipes = pipes  # type: ignore[assignment]  # the double stands in for the process
    return protocol, pipes


async def drain(protocol: _ServerOutput) -> list[bytes]:
    found = []
    while (line := await protocol.next_line()) is not None:
        found.append(line)
    return found


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@given(
    st.lists(st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=8),
    st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_lines_are_the_same_whatever_the_chunk_boundaries(
    texts: list[bytes], cuts: list[int]
) -> None:
    async def run() -> list[bytes]:
        protocol, _ = output()
        for chunk in chunked(b"".join(t + b"\n" for t in texts), cuts):
            protocol.pipe_data_received(1, chunk)
        protocol.pipe_connection_lost(1, None)
        return await drain(protocol)

    assert asyncio.run(run()) == [t for t in texts if t.strip()]


async def test_a_huge_line_in_many_chunks_is_one_line() -> None:
    line = b'{"jsonrpc": "2.0", "method": "x", "params": {"t": "' + b"y" * (20 << 20) + b'"}}'
    protocol, _ = output()
    for chunk in chunked(line + b"\n", list(range(0, len(line), 65536))):
        protocol.pipe_data_received(1, chunk)
    protocol.pipe_connection_lost(1, None)
    assert await drain(protocol) == [line]


async def test_blank_lines_and_output_cut_off_mid_line_are_not_messages() -> None:
    note = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {}}'
    protocol, _ = output()
    protocol.pipe_data_received(1, note[:10])
    protocol.pipe_data_received(1, note[10:] + b"\n\n  \n")
    protocol.pipe_data_received(1, b'{"jsonrpc": "2.0", "id": 1, "res')
    protocol.pipe_connection_lost(1, None)  # the server died mid-answer
    assert await drain(protocol) == [note]


async def test_reading_pauses_while_the_sdk_client_lags_and_resumes_after() -> None:
    protocol, pipes = output()
    protocol.pipe_data_received(1, b'{"n": 1}\n' * (_QUEUED + 1))
    assert pipes.calls == ["pause"]
    for _ in range(_QUEUED // 2):
        await protocol.next_line()
    assert pipes.calls == ["pause"]
    await protocol.next_line()
    assert pipes.calls == ["pause", "resume"]
