"""A stdio transport for the ``mcp`` SDK's `Client` that reads any message size in linear time.

The SDK's own stdio client joins each 64 KiB chunk to the text read so far before splitting
lines, so one large message costs time quadratic in its size (measured here: 10 MB in 1.4 s,
40 MB in 34 s; see the README's MCP section). This transport keeps the chunks of the line
being read in a list and joins them once when the newline arrives, so a 100 MB result costs
what parsing it costs. It speaks the same newline-delimited JSON-RPC, inherits the SDK's safe
environment, and on exit closes the server's stdin, waits briefly, then terminates and kills
it, so a stuck server never outlives its connection. Given a `DirectCalls`, it also carries
the lean ``tools/call`` requests (``pipeline/mcp/_direct.py``): their lines go to the server's
stdin beside the SDK's, and their answers are taken off the reader before the SDK parses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._direct import DirectCalls

__all__ = ["stdio_transport"]

_log = logging.getLogger("pipeline.mcp")
_EXIT_GRACE: Final = 2.0
"""Seconds a server gets to exit after its stdin closes, then again after SIGTERM."""
_CHUNK: Final = 64 * 1024
_QUEUED: Final = 64
"""Lines waiting for the SDK's client beyond which the server's output is not read."""


@contextlib.asynccontextmanager
async def stdio_transport(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    direct: DirectCalls | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``argv`` and yield the ``(read_stream, write_stream)`` pair `Client` expects.

    ``direct``, when given, is attached to the process's stdin and sees every line first.

    Raises:
        OSError: the command cannot be started.
    """
    import anyio
    import mcp_types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    # asyncio's own process pipes: anyio's wrappers add a checkpoint (a loop turn) to every
    # read and write, and a stdio call is one of each. The server's output is split into lines
    # in the pipe's read callback (`_ServerOutput`), where the direct link takes its answers.
    loop = asyncio.get_running_loop()
    transport, output = await loop.subprocess_exec(
        lambda: _ServerOutput(direct, loop),
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=sys.stderr,
        env={**get_default_environment(), **(env or {})},
        cwd=cwd,
    )
    process = asyncio.subprocess.Process(transport, output, loop)
    stdin = process.stdin
    assert stdin is not None

    async def send(data: bytes) -> None:
        stdin.write(data)
        await stdin.drain()  # returns at once unless the pipe is full; raises once it broke

    reads_in, reads_out = anyio.create_memory_object_stream[Any](0)
    writes_in, writes_out = anyio.create_memory_object_stream[Any](0)
    adapter = mcp_types.jsonrpc_message_adapter
    request_type = mcp_types.JSONRPCRequest
    if direct is not None:
        direct.attach(send)

    def parse(line: bytes) -> Any:
        try:
            return SessionMessage(adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            _log.warning("an MCP server sent a line that is not JSON-RPC: %s", exc)
            return exc

    async def read() -> None:
        """Hand the lines the direct link did not take to the SDK's client, in order."""
        try:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async with reads_in:
                    while (line := await output.next_line()) is not None:
                        await reads_in.send(parse(line))
        finally:
            if direct is not None:
                direct.close()  # the server's output ended: no direct call may wait forever

    async def write() -> None:
        try:
            async with writes_out:
                async for message in writes_out:
                    if direct is not None and isinstance(message.message, request_type):
                        direct.saw_request(message.message.params)
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await send(text.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            if direct is not None:
                direct.close()
            await reads_in.aclose()  # the server is gone: no request may wait forever

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        group.start_soon(write)
        try:
            yield reads_out, writes_in
        finally:
            with anyio.CancelScope(shield=True):
                await writes_in.aclose()
                await _stop(process)
                await reads_out.aclose()
            group.cancel_scope.cancel()


class _ServerOutput(asyncio.subprocess.SubprocessStreamProtocol):
    """The server process's protocol: its output split into lines as the bytes arrive.

    A line's chunks are joined once, when its newline arrives (linear in its size). The direct
    link sees each line first, in the read callback, and takes its answers there (the awaiting
    call resumes without a reader task waking up); the other non-blank lines queue for the
    SDK's client (`next_line`), and while more than `_QUEUED` wait, reading pauses. Output
    after the last newline when the pipe closes is not a message and is dropped.
    """

    def __init__(self, direct: DirectCalls | None, loop: asyncio.AbstractEventLoop) -> None:
        """Give the lines to ``direct`` first (when given)."""
        super().__init__(limit=_CHUNK, loop=loop)
        self._direct = direct
        self._parts: list[bytes] = []
        self._lines: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._paused = False
        self._pipes: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the process's transport (to pause its output pipe)."""
        super().connection_made(transport)
        if isinstance(transport, asyncio.SubprocessTransport):
            self._pipes = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        """Split the server's output into lines (any other pipe as asyncio does)."""
        if fd != 1 or isinstance(data, str):
            super().pipe_data_received(fd, data)
            return
        parts, direct = self._parts, self._direct
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            parts.append(data[start:end])
            start = end + 1
            line = b"".join(parts)
            parts.clear()
            if direct is not None and direct.take(line):
                continue
            if line.strip():
                self._lines.append(line)
                self._wake()
        if start < len(data):
            parts.append(data[start:] if start else data)
        if len(self._lines) > _QUEUED and not self._paused:
            self._pause(True)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        """The server's output closed: no more lines, and no direct call may wait for one."""
        if fd == 1:
            self._ended = True
            self._parts.clear()
            self._wake()
            if self._direct is not None:
                self._direct.close()
        super().pipe_connection_lost(fd, exc)

    async def next_line(self) -> bytes | None:
        """The next line for the SDK's client (None: the output ended)."""
        lines = self._lines
        while not lines:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        line = lines.popleft()
        if self._paused and len(lines) <= _QUEUED // 2:
            self._pause(False)
        return line

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pause(self, paused: bool) -> None:
        pipe = self._pipes.get_pipe_transport(1) if self._pipes is not None else None
        if isinstance(pipe, asyncio.ReadTransport):
            self._paused = paused
            if paused:
                pipe.pause_reading()
            else:
                pipe.resume_reading()


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close stdin, then terminate, then kill: every wait bounded by `_EXIT_GRACE`."""
    import anyio

    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    for signal in (None, "terminate", "kill"):
        if signal == "terminate":
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        elif signal == "kill":
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with anyio.move_on_after(_EXIT_GRACE):
            await process.wait()
            return
