"""`TurnResult`: everything a finished turn produced."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._stash_snapshot import StashSnapshot
from .errors import TurnAbortedError
from .models._seam import Usage

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._events import TurnStatus
    from .calls._decision import ToolDecision
    from .calls._toolcall import ToolCall
    from .errors import LoopError
    from .models._message import Message

__all__ = ["TurnResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """The outcome of one turn. `TurnRunner.run` returns it instead of raising.

    ``stash`` may be given as any mapping; the result keeps it as a `StashSnapshot` (a ``dict``
    that a `StashKey` can also index: ``result.stash[SEARCHES]`` is typed by the key).
    """

    turn_id: str
    """The turn's id."""
    conversation_id: str | None
    """The conversation it belongs to, if any."""
    status: TurnStatus
    """``"completed"``, ``"failed"`` or ``"aborted"``."""
    output: str | None
    """The final assistant text, or None."""
    messages: tuple[Message, ...]
    """This turn's messages (the user input first)."""
    tool_calls: tuple[ToolCall, ...]
    """This turn's stored tool calls, in storage order."""
    errors: tuple[LoopError, ...]
    """Every error raised or reported during the turn, in order."""
    iterations: int
    """How many dispatch iterations ran."""
    stash: StashSnapshot
    """The stash at turn end: a ``dict`` that typed keys can index too. The turn hands its data
    over instead of copying it (the live ``ctx.stash`` is read-only once the turn ended)."""
    started_at: datetime
    """When the turn started."""
    ended_at: datetime
    """When it ended."""
    abort_reason: str | None = None
    """Why the turn was aborted, if it was and a reason was given."""
    tool_decisions: tuple[ToolDecision, ...] = ()
    """The decisions about tools taken in the turn (a tool hidden after a limit, a tool a
    policy withdrew), in order."""

    if TYPE_CHECKING:
        # What type checkers see of the generated constructor: ``stash`` takes any mapping of
        # plain data (`Stash.all()` gives a dict), which __post_init__ wraps. Keep it in step
        # with the fields above.
        def __init__(
            self,
            *,
            turn_id: str,
            conversation_id: str | None,
            status: TurnStatus,
            output: str | None,
            messages: tuple[Message, ...],
            tool_calls: tuple[ToolCall, ...],
            errors: tuple[LoopError, ...],
            iterations: int,
            stash: Mapping[str, Any],
            started_at: datetime,
            ended_at: datetime,
            abort_reason: str | None = None,
            tool_decisions: tuple[ToolDecision, ...] = (),
        ) -> None: ...

    def __post_init__(self) -> None:
        """Keep ``stash`` as a `StashSnapshot`, whatever mapping was given."""
        if type(self.stash) is not StashSnapshot:
            object.__setattr__(self, "stash", StashSnapshot(self.stash))

    @property
    def usage(self) -> Usage:
        """Tokens the turn's model calls used (from ``loopware.usage`` in the stash snapshot)."""
        return Usage.from_mapping(self.stash.get("loopware", {}).get("usage"))

    @property
    def ok(self) -> bool:
        """True when the turn completed."""
        return self.status == "completed"

    def raise_for_status(self) -> None:
        """Raise the first error of a failed turn, or `TurnAbortedError` for an aborted one."""
        if self.status == "failed":
            if self.errors:
                raise self.errors[0]
            raise RuntimeError("the turn failed without recording an error")  # pragma: no cover
        if self.status == "aborted":
            raise TurnAbortedError(
                f"the turn was aborted: {self.abort_reason}" if self.abort_reason else None,
                turn_id=self.turn_id,
            )


TurnResult.__module__ = "pipeline"
