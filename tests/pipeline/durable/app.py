"""The application the durable tests' worker processes run (``loopware worker`` names it).

``PlanModel`` is stateless: it decides from the request alone (this turn's completed calls), so a
turn resumed in a fresh process asks for exactly what the first process would have. ``record``
appends its token (the call id) to ``$LOOPWARE_TEST_LOG`` with fsync, so the file proves how
often each handler ran. Sleeps widen the windows a SIGKILL can land in.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from pathlib import Path

from middleware import (
    ApprovalGate,
    IterationBudget,
    Middleware,
    RepetitionDetector,
    TokenBudget,
    ToolCallCounter,
    ToolCallLimit,
    ToolPolicy,
)
from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import TurnContext, tool
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCallContext, ToolCallNext
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall, Usage

CALLS_PER_RESPONSE = 2
RESPONSES = 3
CALLS_PER_TURN = CALLS_PER_RESPONSE * RESPONSES


@tool
async def record(token: str) -> str:
    """Record a token (the test's counting tool)."""
    await asyncio.sleep(random.uniform(0.0, 0.04))
    fd = os.open(os.environ["LOOPWARE_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{token}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    await asyncio.sleep(random.uniform(0.0, 0.02))
    return f"recorded {token}"


@tool
def refund(order: str) -> str:
    """Refund an order (needs approval)."""
    fd = os.open(os.environ["LOOPWARE_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"refund {order}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return f"refunded {order}"


@tool
def crash_once(token: str) -> str:
    """Kill this worker the first time it runs for ``token`` (a crash at a known point)."""
    log = Path(os.environ["LOOPWARE_TEST_LOG"])
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{token}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    marker = log.with_name(f"crashed-{token}")
    if not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return f"survived {token}"


TOOLS = [record, refund, crash_once]


class PlanModel:
    """Proposes ``CALLS_PER_RESPONSE`` calls per response, ``RESPONSES`` times, then answers."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(random.uniform(0.0, 0.02))
        turn = request.turn_id or "turn"
        mine = [c for c in request.tool_calls if c.id.startswith(f"{turn}-")]
        usage = Usage(input_tokens=10, output_tokens=5)
        asked = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        if asked == "crash":
            if len(mine) < 2:
                name = "crash_once" if mine else "record"
                cid = f"{turn}-{len(mine)}"
                call = ProposedToolCall(id=cid, name=name, arguments=f'{{"token": "{cid}"}}')
                return ModelResponse(tool_calls=[call], usage=usage)
            return ModelResponse(text=f"crash: {[c.is_error for c in mine]}", usage=usage)
        if asked.startswith("refund "):
            if not mine:
                order = asked.removeprefix("refund ")
                call = ProposedToolCall(
                    id=f"{turn}-r", name="refund", arguments=f'{{"order": "{order}"}}'
                )
                return ModelResponse(tool_calls=[call], usage=usage)
            return ModelResponse(text=f"refund: {text_of(mine[0].results)}", usage=usage)
        if len(mine) >= CALLS_PER_TURN:
            return ModelResponse(text=f"done after {len(mine)} calls", usage=usage)
        calls = [
            ProposedToolCall(
                id=f"{turn}-{i}", name="record", arguments=f'{{"token": "{turn}-{i}"}}'
            )
            for i in range(len(mine), len(mine) + CALLS_PER_RESPONSE)
        ]
        return ModelResponse(tool_calls=calls, usage=usage)


def text_of(results: object) -> str:
    """A call's result as text (an artifact's body, or the inline text)."""
    return results.as_string() if isinstance(results, SpooledArtifact) else str(results)


def model() -> PlanModel:
    """The model (a factory, as ``model_from`` takes it)."""
    return PlanModel()


def chaos() -> Middleware:
    """A middleware whose stash a re-run cannot rebuild: a random number before every call."""
    mw = Middleware("chaos")

    @mw.tool_call
    async def stamp(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.stash.update("test.stamp", lambda _: random.random(), default=0.0)
        await call_next()

    return mw


CUSTOMER_LIMIT = 10


def customer(ctx: TurnContext) -> str:
    """The turn's customer (the stash the client queued the turn with)."""
    return str(ctx.stash.get("customer"))


def customer_limit() -> list[object]:
    """At most `CUSTOMER_LIMIT` record runs per customer, counted in the shared store."""
    return [ToolCallLimit({"record": CUSTOMER_LIMIT}, scope=customer, scope_name="customer")]


def stack() -> list[object]:
    """Every built-in policy (an approval gate on refunds) and the audit log."""
    return [
        ToolPolicy(deny=["shell*"]),
        IterationBudget(10),
        TokenBudget(100_000),
        ToolCallCounter(),
        ToolCallLimit({"record": 100}, total=200),
        RepetitionDetector(threshold=3),
        ApprovalGate(["refund"]),
        AuditLog(SqliteAuditSink(os.environ["LOOPWARE_TEST_AUDIT"])),
    ]
