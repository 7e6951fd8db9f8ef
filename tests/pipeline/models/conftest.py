"""A scripted HTTP server for the provider models: the real SDK client over a MockTransport.

`Server` answers the SDK's requests in order with recorded responses (written in the wire
format the provider's API returns) and keeps every request, so tests assert the exact bodies
loopware sends. Nothing touches the network.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import openai
import pytest

Reply = httpx2.Response | Callable[[httpx2.Request], httpx2.Response | Awaitable[httpx2.Response]]

OPENAI_URL = "https://api.openai.com/v1"


class Server:
    """Answers request k with reply k (a response, or a function of the request)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON body of every request received, in order."""
        return [json.loads(r.content) for r in self.requests]

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request {len(self.requests)}: {request.content!r}")
        reply = self.replies.pop(0)
        if isinstance(reply, httpx2.Response):
            return reply
        result = reply(request)
        return result if isinstance(result, httpx2.Response) else await result

    def client(self, *, base_url: str = OPENAI_URL, max_retries: int = 0) -> openai.AsyncOpenAI:
        """A real `AsyncOpenAI` whose HTTP goes to this server."""
        return openai.AsyncOpenAI(
            api_key="sk-test",
            base_url=base_url,
            max_retries=max_retries,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
        )


@pytest.fixture
def serve() -> Callable[..., Server]:
    """``serve(reply, ...)`` builds a `Server` answering with the given replies in order."""

    def make(*replies: Reply) -> Server:
        return Server(list(replies))

    return make


def json_reply(body: dict[str, Any], status: int = 200, **headers: str) -> httpx2.Response:
    """A JSON response as the API sends it (with a request id)."""
    return httpx2.Response(
        status,
        json=body,
        headers={
            "x-request-id": "req_test123",
            **{k.replace("_", "-"): v for k, v in headers.items()},
        },
    )


def sse_reply(
    events: list[dict[str, Any]], *, named: bool = False, done: bool = True
) -> httpx2.Response:
    """A ``text/event-stream`` response: one ``data:`` line per event (``event:`` lines too
    when ``named``, as the Responses API sends them), then ``[DONE]``."""
    lines = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        lines.append(f"{head}data: {json.dumps(event)}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return httpx2.Response(
        200,
        content="".join(lines).encode(),
        headers={"content-type": "text/event-stream", "x-request-id": "req_stream1"},
    )


def error_body(
    message: str, type_: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
