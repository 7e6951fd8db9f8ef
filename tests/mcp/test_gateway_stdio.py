"""The gateway's thread-free stdin: lines as the SDK reads them, and an oversized one dropped."""

from __future__ import annotations

import asyncio

from loopware_cli._gateway_stdio import _Lines


async def collect(data: bytes, limit: int) -> list[str]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    return [line async for line in _Lines(reader)]


async def test_lines_are_read_whole_and_decoded() -> None:
    assert await collect(b'{"a": 1}\n{"b": "\xc3\xa9"}\n', 1024) == ['{"a": 1}\n', '{"b": "é"}\n']


async def test_a_line_over_the_limit_is_dropped_and_reading_goes_on() -> None:
    lines = await collect(b"x" * 100 + b'\n{"ok": true}\n', 16)
    assert lines[0] == "(a request too long to read)\n"
    assert lines[-1] == '{"ok": true}\n'
    assert not any("x" * 17 in line for line in lines)
