"""Finishing a turn: `TurnEnd`, the `TurnResult`, the stored turn record, pending listeners."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._bus import drain
from ._events import Log, TurnEnd, TurnStatus
from ._result import TurnResult
from .stores._store import TurnRecord

if TYPE_CHECKING:
    from ._turn import Turn

__all__ = ["finish_turn"]


async def finish_turn(
    turn: Turn,
    status: TurnStatus,
    started_at: datetime,
    t0: float,
    first_message: int,
    cancelled: asyncio.CancelledError | None,
) -> TurnResult:
    """Emit `TurnEnd`, build the result, save the turn record, await listeners."""
    ctx = turn.ctx
    ended_at = datetime.now(UTC)
    duration_ms = (time.perf_counter() - t0) * 1000.0
    failure = turn.errors[0] if status == "failed" and turn.errors else None
    if ctx._bus.listening:
        ctx.emit(
            TurnEnd(turn_id=ctx.turn_id, status=status, duration_ms=duration_ms, error=failure)
        )
    output = None
    if status == "completed":
        for message in reversed(ctx._messages[first_message:]):
            if message.role == "assistant" and not message.tool_call_ids:
                output = message.content
                break
    result = TurnResult(
        turn_id=ctx.turn_id,
        conversation_id=ctx.conversation_id,
        status=status,
        output=output,
        messages=tuple(ctx._messages[first_message:]),
        tool_calls=tuple(ctx._calls),
        errors=tuple(turn.errors),
        iterations=turn.iterations,
        stash=ctx.stash.all(),
        started_at=started_at,
        ended_at=ended_at,
        abort_reason=ctx.abort_reason if status == "aborted" else None,
    )
    record = TurnRecord(
        turn_id=ctx.turn_id,
        conversation_id=ctx.conversation_id,
        status=status,
        input=ctx.input,
        output=output,
        iterations=turn.iterations,
        error_code=failure.code if failure else None,
        error_message=failure.message if failure else None,
        started_at=started_at,
        ended_at=ended_at,
    )
    try:
        await turn._store.save_turn(record)
    except Exception as exc:  # the turn already happened; never lose the result over this
        if ctx._bus.listening:
            ctx.emit(
                Log(
                    turn_id=ctx.turn_id,
                    level="error",
                    kind="store_error",
                    message=f"saving the turn record failed: {exc!r}",
                    payload={},
                )
            )
    if turn._release_spool:
        # The result's artifacts keep their readers; the runner-owned store lets go of them.
        for key in ctx._spool_keys:
            ctx.spool.delete(key)
    if cancelled is not None:
        raise cancelled  # after recording the turn as aborted (DESIGN 6.1)
    if ctx._pending:
        await drain(ctx._pending)
    return result
