"""`ScopedCallSlots`: `ToolCallLimit`'s ``tool_call`` reservation when its counts live in a store.

Around one call: derive the turn's key, reserve a slot under the tool's counter and the total's
(all or none, atomically in the store), run the handler, then consume the slot if the call used
it (``count=``) or release it. A call that cannot be counted (no key, a store that keeps no
counts, a store that fails) is refused: a limit never fails open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pipeline import DispatchContext
from pipeline.calls import LimitReading, ToolCallContext, ToolCallNext

from ._scope import ScopedCounts, ScopeKey

__all__ = ["Hide", "Refuse", "ScopedCallSlots"]

Refuse = Callable[[ToolCallContext, str, "LimitReading | None"], None]
"""How the policy refuses a call (deny, and nack when it ends the dispatch), with the reading
of the count that refused it."""
Hide = Callable[[DispatchContext, str, "str | None", str], None]
"""How the policy hides a tool: ``(ctx, tool, call_id, reason)``."""


class ScopedCallSlots:
    """Reserve, consume or release a call's slot in the turn's store (one per policy).

    Args:
        counts: The policy's scoped counts (key, counters, clock, window, expiry).
        limits: Tool name to its limit.
        total: The limit over all tools, or None.
        successes_only: True when only calls that ran without an error use a slot.
        hide: Whether a tool at its limit is hidden for the rest of the turn.
    """

    __slots__ = ("_counts", "_hide", "_limits", "_noun", "_successes_only", "_total")

    def __init__(
        self,
        counts: ScopedCounts,
        limits: Mapping[str, int],
        total: int | None,
        *,
        successes_only: bool,
        hide: bool,
    ) -> None:
        """Keep the configuration (see the class docstring)."""
        self._counts = counts
        self._limits = limits
        self._total = total
        self._successes_only = successes_only
        self._hide = hide
        self._noun = "successful runs" if successes_only else "runs"

    def __repr__(self) -> str:
        """Show the limits."""
        return f"ScopedCallSlots({dict(self._limits)!r}, total={self._total})"

    def _reason(self, key: ScopeKey, what: str, used: int, limit: int) -> str:
        return f"{used} of {limit} {what} {self._noun} {key.phrase}{self._counts.window_text}"

    async def around(
        self, ctx: ToolCallContext, call_next: ToolCallNext, refuse: Refuse, hide: Hide
    ) -> None:
        """Run the call if its slot is granted; refuse it otherwise."""
        tool = ctx.tool_name
        limit = self._limits.get(tool)
        total = self._total
        if limit is None and total is None:
            await call_next()
            return
        counts = self._counts
        turn = ctx.dispatch.turn
        try:
            key = counts.key(turn)
            store = counts.store(turn)
        except Exception as exc:  # no key, no counter store: refuse, never fail open
            refuse(ctx, f"its count cannot be kept: {exc}", None)
            return
        pairs: list[tuple[str, int, str]] = []  # (counter, limit, what a refusal names)
        if limit is not None:
            pairs.append((counts.counter(key, tool), limit, repr(tool)))
        if total is not None:
            pairs.append((counts.counter(key, "*"), total, "tool"))
        names = [name for name, _, _ in pairs]
        d = ctx.dispatch
        slot = counts.slot_id(f"{d.turn_id}/{d.dispatch_id}/{d.iteration}/{ctx.call_id}")
        try:
            grant = await counts.reserve(
                store, counts.limits([(name, lim) for name, lim, _ in pairs]), slot
            )
        except Exception as exc:
            refuse(ctx, f"its count could not be reserved in the store: {exc}", None)
            return
        if not grant.granted:
            index = grant.refused_by or 0
            _, lim, what = pairs[index]
            used = grant.counts[index]
            reason = self._reason(key, what, used, lim) + " are used up"
            reading = LimitReading(
                scope=key.kind,
                key=key.key,
                counter=tool if what != "tool" else "*",
                count=used,
                limit=lim,
                window_s=counts.window,
            )
            refuse(ctx, reason, reading)
            if self._hide:
                _hide_all(ctx.dispatch, hide, tool if what != "tool" else None, None, reason)
            return
        used_slot = False
        try:
            await call_next()
        finally:
            used_slot = ctx.ran and not (self._successes_only and ctx.is_error)
            try:
                await counts.settle(store, slot, names, consume=used_slot)
            except Exception as exc:  # the reservation expires on its own
                ctx.dispatch.log.warning(
                    "limit.settle_failed",
                    f"the slot of call {ctx.call_id!r} could not be settled: {exc}",
                    slot=slot,
                )
        if used_slot and self._hide:
            for (_, lim, what), before in zip(pairs, grant.counts, strict=True):
                if before + 1 >= lim:
                    reason = self._reason(key, what, before + 1, lim) + " are used up"
                    which = tool if what != "tool" else None
                    _hide_all(ctx.dispatch, hide, which, ctx.call_id, reason)


def _hide_all(
    d: DispatchContext, hide: Hide, tool: str | None, call_id: str | None, reason: str
) -> None:
    """Hide ``tool`` (every visible tool when None) for the rest of the turn."""
    names = [tool] if tool is not None else [t.name for t in d.tools.visible()]
    for name in names:
        hide(d, name, call_id, reason)
