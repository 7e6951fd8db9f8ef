"""`ToolCallCounter`: counts completed and failed calls per tool and in total, in the stash."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline import DispatchContext, Stash, StashKey, TurnContext
from pipeline.calls import ToolCall

from ._keys import CountKeys
from ._options import check_namespace
from ._registration import dispatch_output, turn_input, turn_output

__all__ = ["ToolCallCounter"]


class ToolCallCounter:
    """Count each turn's tool calls per tool and in total, completed and failed apart.

    Stash layout under ``namespace`` (default ``loopware.counter``)::

        by_tool.<tool>.completed   by_tool.<tool>.failed
        total.completed            total.failed

    A call to a name no tool could have (not ``^[A-Za-z0-9_-]{1,64}$``: a dot, a space, 65
    characters, none at all; see `is_tool_name`) is counted under ``by_tool.(invalid name)``:
    a model's made-up name never becomes a stash path of its own.

    The totals are set to 0 when the turn starts (unless the stash seed carries them). Every
    stored call is counted once, wherever it came from: calls of an iteration whose
    ``dispatch_output`` did not run (an executor that stored calls and acked at once) are
    counted in ``turn_output``. State lives only in the stash (and the turn's
    `unseen_tool_calls` position), so one instance serves any number of concurrent turns.

    Args:
        namespace: The stash path the counts live under.

    Raises:
        InvalidMiddlewareConfigError: ``namespace`` is not a valid stash path.
    """

    __slots__ = ("_completed", "_failed", "_namespace", "_total_completed", "_total_failed")

    def __init__(self, *, namespace: str = "loopware.counter") -> None:
        """Configure the counter (see the class docstring)."""
        self._namespace = check_namespace("ToolCallCounter", namespace)
        self._completed = CountKeys(f"{namespace}.by_tool.", ".completed")
        self._failed = CountKeys(f"{namespace}.by_tool.", ".failed")
        self._total_completed = StashKey[int](f"{namespace}.total.completed", default=0)
        self._total_failed = StashKey[int](f"{namespace}.total.failed", default=0)

    def __repr__(self) -> str:
        """Show the namespace."""
        return f"ToolCallCounter(namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        """The stash path the counts live under."""
        return self._namespace

    @turn_input
    def start(self, ctx: TurnContext) -> None:
        """Make the totals present (0) from the start of the turn."""
        stash = ctx.stash
        for key in (self._total_completed, self._total_failed):
            if key not in stash:
                stash[key] = 0

    @dispatch_output
    def count(self, ctx: DispatchContext) -> None:
        """Count the calls stored in this iteration (and any stored earlier not yet counted)."""
        self._count(ctx.stash, ctx.unseen_tool_calls(self))

    @turn_output
    def count_late(self, ctx: TurnContext) -> None:
        """Count calls stored after the last ``dispatch_output`` (an acking executor's)."""
        self._count(ctx.stash, ctx.unseen_tool_calls(self))

    def _count(self, stash: Stash, calls: Sequence[ToolCall]) -> None:
        for call in calls:
            if call.is_error:
                stash.increment(self._failed(call.tool))
                stash.increment(self._total_failed)
            else:
                stash.increment(self._completed(call.tool))
                stash.increment(self._total_completed)


ToolCallCounter.__module__ = "middleware"
