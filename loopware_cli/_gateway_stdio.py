"""The gateway's standard input and output for the SDK's ``stdio_server``, without threads.

The SDK serves stdio through ``anyio.wrap_file``: every line read and every write and flush is
a hand-off to a worker thread. The gateway answers every call with at least one read and one
write, so it reads fd 0 and writes fd 1 as asyncio pipes instead (``stdio_server`` takes any
line iterator and writer). When fd 0 or 1 cannot be a pipe (a regular file), it returns None
and the SDK's own streams are used.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import deque
from typing import Final, Protocol

__all__ = ["LineTap", "pipe_streams"]

_LINE_LIMIT: Final = 256 * 1024 * 1024
"""The longest request line accepted (a client's call; results travel the other way)."""
_QUEUED: Final = 64
"""Lines waiting for the SDK beyond which stdin is not read until it catches up."""


class LineTap(Protocol):
    """Sees every line first: takes the inbound ones it answers, watches the outbound ones."""

    def take(self, line: bytes) -> bool:
        """Answer ``line`` itself (True), or let it go on to the SDK (False)."""

    def sent(self, data: bytes) -> None:
        """See a line the SDK sends."""


class _Lines(asyncio.Protocol):
    """Standard input as lines: split as the bytes arrive, ``async for line in stdin`` after.

    The split happens in the pipe's read callback, and the tap sees each line there: a line it
    takes (a fast-lane call) is answered without a task waking up to read it. The others queue
    for the SDK's reader, which iterates them; while more than `_QUEUED` wait, reading pauses.
    A line is joined once from its chunks when its newline arrives (linear in its size); one
    longer than the limit is dropped (with a note on stderr) and the SDK reads a non-JSON line
    in its place, so it reports a parse error. At the end, a last line without a newline is
    still a line.
    """

    __slots__ = (
        "_ended",
        "_limit",
        "_parts",
        "_paused",
        "_queue",
        "_size",
        "_skipping",
        "_transport",
        "_waiter",
        "tap",
    )

    def __init__(self, limit: int = _LINE_LIMIT) -> None:
        """Lines of at most ``limit`` bytes (the newline included)."""
        self._limit = limit
        self._parts: list[bytes] = []  # the chunks of the line being read
        self._size = 0
        self._skipping = False  # inside a line over the limit, until its newline
        self._queue: deque[str] = deque()  # lines for the SDK
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._paused = False
        self._transport: asyncio.ReadTransport | None = None
        self.tap: LineTap | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the pipe's transport (to pause it while too many lines wait)."""
        self._transport = transport  # type: ignore[assignment]  # a read pipe's transport

    def data_received(self, data: bytes) -> None:
        """Split ``data`` into lines, joining a line's chunks once (see the class docstring)."""
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
            else:
                self._parts.append(data[start : end + 1])
                line = b"".join(self._parts)
                self._parts.clear()
                self._size = 0
                if len(line) > self._limit:
                    self._too_long()
                else:
                    self._line(line)
            start = end + 1
        if start < len(data) and not self._skipping:
            self._parts.append(data[start:] if start else data)
            self._size += len(data) - start
            if self._size > self._limit:  # dropped now: nothing of it is kept
                self._parts.clear()
                self._size = 0
                self._skipping = True
                self._too_long()

    def _too_long(self) -> None:
        print("loopware gateway: a request over 256 MiB was dropped", file=sys.stderr)
        self._for_sdk("(a request too long to read)\n")  # not JSON: the SDK reports it

    def _line(self, line: bytes) -> None:
        tap = self.tap
        if tap is None or not tap.take(line):
            self._for_sdk(line.decode("utf-8", "replace"))

    def _for_sdk(self, text: str) -> None:
        self._queue.append(text)
        self._wake()
        if len(self._queue) > _QUEUED and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool | None:
        """The end of input: a last line without a newline is still a line."""
        self._end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        """The pipe closed: no more lines."""
        self._end()

    def _end(self) -> None:
        if self._ended:
            return
        if self._parts and not self._skipping:
            line = b"".join(self._parts)
            self._parts.clear()
            self._line(line)
        self._ended = True
        self._wake()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        queue = self._queue
        while not queue:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        line = queue.popleft()
        if self._paused and len(queue) <= _QUEUED // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return line


class _Writer:
    """``await stdout.write(text)`` / ``await stdout.flush()`` over an asyncio pipe."""

    __slots__ = ("_transport", "tap")

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self.tap: LineTap | None = None

    async def write(self, text: str) -> int:
        data = text.encode("utf-8")
        self._transport.write(data)
        if self.tap is not None:
            self.tap.sent(data)
        return len(data)

    def send(self, data: bytes) -> None:
        """Write whole lines now (the fast lane's answers)."""
        self._transport.write(data)

    async def flush(self) -> None:
        await asyncio.sleep(0)  # the transport writes eagerly; let a full pipe push back here


async def pipe_streams() -> tuple[_Lines, _Writer] | None:
    """Standard input and output as asyncio pipes, or None when they cannot be.

    Standard input is connected last: its first lines are read in a later loop turn than the
    one this returns in, so the caller sets the tap before any line arrives.
    """
    loop = asyncio.get_running_loop()
    transport: asyncio.WriteTransport | None = None
    try:
        transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(1, "wb", closefd=False)
        )
        _, lines = await loop.connect_read_pipe(_Lines, os.fdopen(0, "rb", closefd=False))
    except (OSError, ValueError) as exc:
        if transport is not None:
            transport.close()
        print(f"loopware gateway: stdio through threads ({exc})", file=sys.stderr)
        return None
    return lines, _Writer(transport)
