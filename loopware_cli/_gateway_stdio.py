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
from typing import Final, Protocol

__all__ = ["LineTap", "pipe_streams"]

_LINE_LIMIT: Final = 256 * 1024 * 1024
"""The longest request line accepted (a client's call; results travel the other way)."""


class LineTap(Protocol):
    """Sees every line first: takes the inbound ones it answers, watches the outbound ones."""

    def take(self, line: bytes) -> bool:
        """Answer ``line`` itself (True), or let it go on to the SDK (False)."""

    def sent(self, data: bytes) -> None:
        """See a line the SDK sends."""


class _Lines:
    """``async for line in stdin`` over an asyncio stream reader."""

    __slots__ = ("_reader", "tap")

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.tap: LineTap | None = None

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # longer than _LINE_LIMIT: dropped (the reader skips to its end)
                print("loopware gateway: a request over 256 MiB was dropped", file=sys.stderr)
                return "(a request too long to read)\n"  # not JSON: the SDK reports a parse error
            if not line:
                raise StopAsyncIteration
            tap = self.tap
            if tap is None or not tap.take(line):
                return line.decode("utf-8", "replace")


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
    """Standard input and output as asyncio pipes, or None when they cannot be."""
    loop = asyncio.get_running_loop()
    try:
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", closefd=False)
        )
        transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(1, "wb", closefd=False)
        )
    except (OSError, ValueError) as exc:
        print(f"loopware gateway: stdio through threads ({exc})", file=sys.stderr)
        return None
    return _Lines(reader), _Writer(transport)
