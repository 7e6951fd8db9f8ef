"""The stdio transport MCPToolset gives the ``mcp`` SDK's `Client`: linear in a message's size.

Why not the SDK's own ``stdio_client``: its reader appends every chunk it reads to the text
read so far and splits the whole again (``(buffer + chunk).split(newline)``), so a line
that arrives in k chunks is copied k times, and one large result costs time quadratic in its
size (``tests/mcp/test_toolset_faults.py`` reads a result over 100 MB through this transport).
This transport keeps the chunks of the line being read in a list and joins them once, when its
newline arrives, so a line costs what parsing it costs. Everything else is the SDK's: each line
is parsed into a ``SessionMessage`` with the SDK's own message adapter, messages are written as
the SDK's writer writes them, and the SDK's `Client` does the rest (handshake, requests, result
checks, timeouts). It inherits the SDK's safe environment, and on exit closes the server's
stdin, waits briefly, then terminates and kills it, so a stuck server never outlives its
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

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
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``argv`` and yield the ``(read_stream, write_stream)`` pair `Client` expects.

    Raises:
        OSError: the command cannot be started.
    """
    import anyio
    import mcp_types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    # asyncio's own process pipes; the server's output is split into lines in the pipe's read
    # callback (`_ServerOutput`), each line joined once.
    loop = asyncio.get_running_loop()
    transport, output = await loop.subprocess_exec(
        lambda: _ServerOutput(loop),
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

    def parse(line: bytes) -> Any:
        try:
            return SessionMessage(adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            _log.warning("an MCP server sent a line that is not JSON-RPC: %s", exc)
            return exc

    async def read() -> None:
        """Hand the server's lines to the SDK's client, in order."""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with reads_in:
                while (line := await output.next_line()) is not None:
                    await reads_in.send(parse(line))

    async def write() -> None:
        try:
            async with writes_out:
                async for message in writes_out:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await send(text.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
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

    A line's chunks are joined once, when its newline arrives (linear in its size). Non-blank
    lines queue for the SDK's client (`next_line`), and while more than `_QUEUED` wait, reading
    pauses. Output after the last newline when the pipe closes is not a message and is dropped.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the server's output on ``loop``."""
        super().__init__(limit=_CHUNK, loop=loop)
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
        parts = self._parts
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            parts.append(data[start:end])
            start = end + 1
            line = b"".join(parts)
            parts.clear()
            if line.strip():
                self._lines.append(line)
                self._wake()
        if start < len(data):
            parts.append(data[start:] if start else data)
        if len(self._lines) > _QUEUED and not self._paused:
            self._pause(True)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        """The server's output closed: no more lines."""
        if fd == 1:
            self._ended = True
            self._parts.clear()
            self._wake()
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
