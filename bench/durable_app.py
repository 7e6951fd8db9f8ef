"""The application ``bench/durable_load.py`` runs in its workers: one tool call per turn.

The tool appends its token to ``$LOOPWARE_BENCH_LOG`` so the benchmark can prove each handler
ran exactly once; the model decides from the request alone.
"""

from __future__ import annotations

import os

from middleware import ToolCallCounter
from pipeline import tool
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall


@tool
def note(token: str) -> str:
    """Note a token."""
    fd = os.open(os.environ["LOOPWARE_BENCH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)
    return f"noted {token}"


TOOLS = [note]


class OneCallModel:
    """One call to ``note``, then an answer."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        turn = request.turn_id or "turn"
        if any(c.id == f"{turn}-0" for c in request.tool_calls):
            return ModelResponse(text="noted")
        call = ProposedToolCall(id=f"{turn}-0", name="note", arguments=f'{{"token": "{turn}"}}')
        return ModelResponse(tool_calls=[call])


def model() -> OneCallModel:
    """The model factory the worker configuration names."""
    return OneCallModel()


def stack() -> list[object]:
    """One stateful built-in."""
    return [ToolCallCounter()]
