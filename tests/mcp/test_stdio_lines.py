"""The stdio transport's reading of a server's output (pipeline/mcp/_stdio.py): lines split in
the read callback whatever the chunk boundaries, a huge line joined once; the direct link's
answers taken there, before the SDK's client sees anything; the rest handed on in order; a
server whose output ends mid-answer fails the waiting call at once; reading pauses while the
SDK's client lags."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

pytest.importorskip("mcp")

from hypothesis import given
from hypothesis import strategies as st

from pipeline.mcp._direct import DirectCalls
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


def output(direct: DirectCalls | None = None) -> tuple[_ServerOutput, Pipes]:
    protocol = _ServerOutput(direct, asyncio.get_running_loop())
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


async def started_call(direct: DirectCalls, sent: list[bytes]) -> asyncio.Task[dict[str, Any]]:
    async def send(data: bytes) -> None:
        sent.append(data)

    direct.attach(send)
    call = asyncio.create_task(direct.request("tools/call", {"name": "echo", "arguments": {}}))
    await asyncio.sleep(0)
    return call


async def test_the_direct_answer_is_taken_in_the_callback_and_the_rest_handed_on() -> None:
    direct = DirectCalls()
    sent: list[bytes] = []
    call = await started_call(direct, sent)
    rid = json.loads(sent[0])["id"]
    answer = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": []}}).encode()
    note = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {}}'
    protocol, _ = output(direct)
    protocol.pipe_data_received(1, note + b"\n" + answer[:10])
    assert not call.done()
    protocol.pipe_data_received(1, answer[10:] + b"\n\n")
    assert (await call)["result"] == {"content": []}
    protocol.pipe_connection_lost(1, None)
    assert await drain(protocol) == [note]


async def test_output_ending_mid_answer_fails_the_waiting_call_at_once() -> None:
    direct = DirectCalls()
    call = await started_call(direct, [])
    protocol, _ = output(direct)
    protocol.pipe_data_received(1, b'{"jsonrpc": "2.0", "id": "loopware-1", "res')
    protocol.pipe_connection_lost(1, None)  # the server died
    answer = await call
    assert await drain(protocol) == []
    assert answer["error"]["message"] == "Connection closed"


async def test_reading_pauses_while_the_sdk_client_lags_and_resumes_after() -> None:
    protocol, pipes = output()
    protocol.pipe_data_received(1, b'{"n": 1}\n' * (_QUEUED + 1))
    assert pipes.calls == ["pause"]
    for _ in range(_QUEUED // 2):
        await protocol.next_line()
    assert pipes.calls == ["pause"]
    await protocol.next_line()
    assert pipes.calls == ["pause", "resume"]
