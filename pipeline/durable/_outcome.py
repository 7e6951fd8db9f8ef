"""`DurableTurnOutcome`: what a durable turn returns through the system database (plain data)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from .._result import TurnResult

__all__ = ["DurableTurnOutcome", "outcome_of"]


class DurableTurnOutcome(TypedDict):
    """The outcome of a durable turn; the records themselves are in the runner's store."""

    turn_id: str
    """The turn's id, which is also its workflow id."""
    conversation_id: str | None
    """The conversation it belongs to, if any."""
    status: str
    """``"completed"``, ``"failed"`` or ``"aborted"``."""
    output: str | None
    """The final assistant text of a completed turn."""
    iterations: int
    """How many dispatch iterations ran."""
    tool_calls: int
    """How many tool calls the turn stored."""
    error_code: str | None
    """The code of the first error of a failed turn."""
    error_message: str | None
    """Its message."""
    stash: dict[str, Any]
    """The stash at the turn's end (the middleware's state: counts, limits, decisions)."""


def outcome_of(result: TurnResult) -> DurableTurnOutcome:
    """The outcome of a finished turn's result."""
    failure = result.errors[0] if result.status == "failed" and result.errors else None
    return DurableTurnOutcome(
        turn_id=result.turn_id,
        conversation_id=result.conversation_id,
        status=result.status,
        output=result.output,
        iterations=result.iterations,
        tool_calls=len(result.tool_calls),
        error_code=failure.code if failure is not None else None,
        error_message=failure.message if failure is not None else None,
        stash=dict(result.stash),
    )


DurableTurnOutcome.__module__ = "pipeline.durable"
