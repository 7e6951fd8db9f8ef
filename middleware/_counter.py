"""`ToolCallCounter`: counts completed and failed calls per tool and in total, in the stash."""

from __future__ import annotations

from pipeline import CallNext, DispatchContext, TurnContext

from ._options import check_namespace
from ._registration import dispatch_output, turn_input

__all__ = ["ToolCallCounter"]


def _increment(count: int) -> int:
    return count + 1


class ToolCallCounter:
    """Count each turn's tool calls per tool and in total, completed and failed apart.

    Stash layout under ``namespace`` (default ``loopware.counter``)::

        by_tool.<tool>.completed   by_tool.<tool>.failed
        total.completed            total.failed

    The totals are set to 0 when the turn starts (unless the stash seed carries them). State
    lives only in the stash, so one instance serves any number of concurrent turns.

    Args:
        namespace: The stash path the counts live under.

    Raises:
        InvalidMiddlewareConfigError: ``namespace`` is not a valid stash path.
    """

    __slots__ = ("_by_tool", "_namespace", "_total_completed", "_total_failed")

    def __init__(self, *, namespace: str = "loopware.counter") -> None:
        """Configure the counter (see the class docstring)."""
        self._namespace = check_namespace("ToolCallCounter", namespace)
        self._by_tool = f"{namespace}.by_tool."
        self._total_completed = f"{namespace}.total.completed"
        self._total_failed = f"{namespace}.total.failed"

    def __repr__(self) -> str:
        """Show the namespace."""
        return f"ToolCallCounter(namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        """The stash path the counts live under."""
        return self._namespace

    @turn_input
    async def start(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Make the totals present (0) from the start of the turn."""
        stash = ctx.stash
        for path in (self._total_completed, self._total_failed):
            if not stash.has(path):
                stash.set(path, 0)
        await call_next()

    @dispatch_output
    async def count(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Count the calls the executor completed in this iteration."""
        stash = ctx.stash
        for call in ctx.new_tool_calls:
            kind = "failed" if call.is_error else "completed"
            stash.update(f"{self._by_tool}{call.tool}.{kind}", _increment, 0)
            stash.update(
                self._total_failed if call.is_error else self._total_completed, _increment, 0
            )
        await call_next()


ToolCallCounter.__module__ = "middleware"
