"""A tiny OpenAI-compatible chat server on 127.0.0.1 with a scripted brain, for end-to-end tests.

It speaks just enough HTTP/1.1 for the official `openai` client: ``POST
/v1/chat/completions`` with a JSON body, answered as JSON or, when ``stream`` is true, as
server-sent events. The brain is a function from the request body to either a tool call or an
answer text. Every request body is kept (``requests``), and so is whether a client hung up
before its answer was sent (``hung_up``), which is how an aborted turn shows here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Brain = Callable[[dict[str, Any]], "Reply"]


@dataclass(frozen=True, slots=True)
class Reply:
    """What the brain answers: text, or one tool call (no id, like some local servers)."""

    text: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    delay: float = 0.0
    """Seconds to wait before answering (to abort a turn mid-request)."""


@dataclass(slots=True)
class CompatServer:
    """The server; use ``async with CompatServer(brain) as server:`` and ``server.base_url``."""

    brain: Brain
    requests: list[dict[str, Any]] = field(default_factory=list)
    hung_up: int = 0
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> CompatServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = json.loads(await reader.readexactly(int(headers["content-length"])))
                self.requests.append(body)
                reply = self.brain(body)
                if reply.delay:
                    try:
                        await asyncio.wait_for(reader.read(1), reply.delay)
                        self.hung_up += 1  # the client closed the connection while waiting
                        return
                    except TimeoutError:
                        pass
                if body.get("stream"):
                    await self._stream(writer, reply)
                else:
                    payload = json.dumps(_completion(reply)).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(payload)}\r\n\r\n".encode()
                        + payload
                    )
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for chunk in _chunks(reply):
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        done = b"data: [DONE]\n\n"
        writer.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
        await writer.drain()


_USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


def _completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish = "stop"
    if reply.tool is not None:
        finish = "tool_calls"
        message["tool_calls"] = [
            {  # no "id": some OpenAI-compatible servers omit it; arguments as an object
                "type": "function",
                "function": {"name": reply.tool, "arguments": reply.arguments or {}},
            }
        ]
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 0,
        "model": "brain",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _USAGE,
    }


def _chunks(reply: Reply) -> list[dict[str, Any]]:
    base = {
        "id": "chatcmpl-local",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "brain",
    }
    chunks: list[dict[str, Any]] = []
    if reply.tool is not None:
        args = json.dumps(reply.arguments or {})
        call = {"index": 0, "id": "call_s1", "type": "function"}
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "role": "assistant",
                            "tool_calls": [
                                {**call, "function": {"name": reply.tool, "arguments": ""}}
                            ],
                        },
                        "finish_reason": None,
                    }
                ],
            }
        )
        for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
            chunks.append(
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": 0, "function": {"arguments": piece}}]
                            },
                            "finish_reason": None,
                        }
                    ],
                }
            )
        chunks.append(
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        )
    else:
        words = (reply.text or "").split(" ")
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        )
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            chunks.append(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
            )
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({**base, "choices": [], "usage": _USAGE})
    return chunks
