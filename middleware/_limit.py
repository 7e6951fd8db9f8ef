"""`ToolCallLimit`: caps how many times tools run per tool and in total within a turn."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType
from typing import Literal

from pipeline import DispatchContext, StashKey, TurnContext
from pipeline.calls import LimitReading, ToolCall, ToolCallContext, ToolCallNext, ToolDecision
from pipeline.errors import InvalidMiddlewareConfigError, PolicyViolationError
from pipeline.stages import MiddlewareSpec

from ._keys import CountKeys
from ._options import check_choice, check_int, check_namespace
from ._registration import dispatch_input, dispatch_output, tool_call, turn_output
from ._scope import (
    DEFAULT_TTL,
    Clock,
    Scope,
    default_clock,
    scoped_counts,
)
from ._scoped_slots import ScopedCallSlots

__all__ = ["LimitCount", "ToolCallLimit"]

OnExceed = Literal["hide", "nack"]
"""What `ToolCallLimit` does at a limit: hide the tool, or end the dispatch."""
LimitCount = Literal["runs", "successes"]
"""What uses up a `ToolCallLimit`: every handler run, or only runs that succeeded."""

_ACTIONS: tuple[OnExceed, ...] = ("hide", "nack")
_COUNTS: tuple[LimitCount, ...] = ("runs", "successes")
_NO_LIMITS: Mapping[str, int] = MappingProxyType({})
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tool name can be (``Tool``'s rule): anything else could never be limited."""


class ToolCallLimit:
    """Cap how many times each tool (and all tools together) runs within one turn.

    Enforcement happens in the ``tool_call`` stage, on the exact call: a call beyond a limit is
    denied before its handler runs, and the model reads why. A call reserves its slot as it
    passes the stage, so within one batch of parallel calls slots go in proposal order: limit
    3 with 10 calls in one batch means exactly 3 handler runs. The hook is registered
    outermost but for `ToolPolicy` (``order=-100``), so no other hook can await before the
    reservation.

    What uses up a limit (``count``): with ``"runs"`` (the default) every call whose handler
    ran, whatever its outcome (a handler that does its side effect and then raises, or whose
    result a hook withholds, has run); with ``"successes"`` only calls whose handler ran and
    whose record is not an error. Calls that never ran (denied, invalid, answered by a hook)
    give their slot back.

    With ``on_exceed="hide"`` a tool is also hidden once its limit is used up (all tools once
    ``total`` is), for the rest of the turn, even tools registered later such as forged
    artifact tools: a `ToolDecision` the model reads when it calls the tool again. With
    ``on_exceed="nack"`` the call beyond the limit is denied and the dispatch ends with
    `PolicyViolationError`; the rest of the batch does not run (every later call reaching the
    stage is denied, whatever its tool).

    Stash layout under ``namespace`` (default ``loopware.limit``): ``used.<tool>`` for each
    tool with a limit and ``total`` (every tool's, kept when ``total`` is set): the slots
    taken, by runs made and by calls running now (a call takes its slot as it passes the
    stage and gives it back if it does not use it). Calls stored without passing the stage (a
    custom executor that builds its own records) are still counted after the fact in
    ``dispatch_output``, and calls of an iteration whose ``dispatch_output`` did not run (an
    executor that stored calls and acked at once) in ``turn_output``.

    Scoped limits (``scope="conversation"`` or a key callable, with an optional ``window``)
    count in the turn's store (a `CounterStore`), reserving a slot atomically before the handler
    runs, so they hold across turns, restarts and workers; they count only calls that pass the
    stage, and ``"hide"`` hides a tool once its slots are used up. See ``docs/policies.md``.

    Args:
        limits: Tool name to the most runs allowed (at least 1).
        total: The most runs allowed across all tools, or None.
        on_exceed: ``"hide"`` or ``"nack"``.
        count: ``"runs"`` or ``"successes"`` (see above).
        namespace: The stash path of its counts (and the prefix of its store counters).
        scope: ``"turn"`` (default: counts in the stash), ``"conversation"``, or a callable
            ``(TurnContext) -> str`` giving the key turns share (a customer id from the stash).
        window: A rolling window (``timedelta(days=1)``): a run counts for that long. Only
            with a scope other than ``"turn"``.
        clock: Seconds since the epoch (default ``time.time``); tests pass a hand-moved clock.
        reservation_ttl: How long a reservation that was never settled (its worker died)
            keeps counting; longer than any handler runs. Default 5 minutes.
        scope_name: What a key is called in refusals (``"customer"``: "for this customer").

    Raises:
        InvalidMiddlewareConfigError: no limit at all, a key that is not a tool name (a glob
            such as ``"search*"`` included) or a bad limit, a bad scope, a ``window`` on the
            turn scope, or another option out of range.
    """

    __slots__ = (
        "_count",
        "_limits",
        "_namespace",
        "_on_exceed",
        "_scope",
        "_slots",
        "_total",
        "_total_key",
        "_used",
    )

    def __init__(
        self,
        limits: Mapping[str, int] = _NO_LIMITS,
        total: int | None = None,
        on_exceed: OnExceed = "hide",
        *,
        count: LimitCount = "runs",
        namespace: str = "loopware.limit",
        scope: Scope = "turn",
        window: timedelta | None = None,
        clock: Clock = default_clock,
        reservation_ttl: timedelta = DEFAULT_TTL,
        scope_name: str = "key",
    ) -> None:
        """Configure the limits (see the class docstring)."""
        owner = "ToolCallLimit"
        given: object = limits  # checked at run time whatever the annotation says
        if not isinstance(given, Mapping):
            raise InvalidMiddlewareConfigError(
                f"{owner}: limits must map tool names to ints, got {limits!r}", option="limits"
            )
        checked: dict[str, int] = {}
        for tool, limit in given.items():
            if not isinstance(tool, str) or _TOOL_NAME.fullmatch(tool) is None:
                raise InvalidMiddlewareConfigError(
                    f"{owner}: limits keys must be tool names (not patterns), got {tool!r}",
                    option="limits",
                )
            checked[tool] = check_int(owner, f"limits[{tool!r}]", limit, minimum=1)
        self._limits: Mapping[str, int] = MappingProxyType(checked)
        self._total = None if total is None else check_int(owner, "total", total, minimum=1)
        if not checked and self._total is None:
            raise InvalidMiddlewareConfigError(
                f"{owner}: give per-tool limits, total=, or both", option="limits"
            )
        self._on_exceed = check_choice(owner, "on_exceed", on_exceed, _ACTIONS)
        self._count = check_choice(owner, "count", count, _COUNTS)
        self._namespace = check_namespace(owner, namespace)
        self._used = CountKeys(f"{namespace}.used.")
        self._total_key = StashKey[int](f"{namespace}.total", default=0)
        self._scope, counts = scoped_counts(
            owner,
            namespace,
            scope,
            window=window,
            clock=clock,
            reservation_ttl=reservation_ttl,
            scope_name=scope_name,
        )
        self._slots: ScopedCallSlots | None = None
        if counts is not None:
            self._slots = ScopedCallSlots(
                counts,
                self._limits,
                self._total,
                successes_only=self._count == "successes",
                hide=self._on_exceed == "hide",
            )

    def __repr__(self) -> str:
        """Show the configuration."""
        scope = self._scope
        name = scope if isinstance(scope, str) else "<key>"
        shown = "" if scope == "turn" else f", scope={name!r}"
        return (
            f"ToolCallLimit({dict(self._limits)!r}, total={self._total}, "
            f"on_exceed={self._on_exceed!r}, count={self._count!r}, "
            f"namespace={self._namespace!r}{shown})"
        )

    @property
    def limits(self) -> Mapping[str, int]:
        """Per-tool limits (read-only)."""
        return self._limits

    @property
    def total(self) -> int | None:
        """The limit across all tools, if any."""
        return self._total

    @property
    def on_exceed(self) -> OnExceed:
        """The action taken."""
        return self._on_exceed

    @property
    def count(self) -> LimitCount:
        """What uses up a limit: ``"runs"`` or ``"successes"``."""
        return self._count

    @property
    def namespace(self) -> str:
        """The stash path of its counts."""
        return self._namespace

    @property
    def scope(self) -> Scope:
        """What it counts over: ``"turn"``, ``"conversation"`` or the key callable."""
        return self._scope

    def middleware_specs(self) -> list[MiddlewareSpec]:
        """This instance's stage middleware (``pipeline.stages.MiddlewareProvider``).

        ``keep_hidden`` is composed only when ``on_exceed="hide"`` and ``total`` is set: a
        per-tool hidden mark already survives re-forging, so only "hide every tool" needs to
        catch tools that first appear later in the turn. Leaving it out otherwise keeps a
        whole stage off the per-iteration path. A scoped limit composes only its ``tool_call``
        hook (``reserve_scoped``): its counts live in the store, not the stash.
        """
        methods: list[object] = [ToolCallLimit.reserve_scoped]
        if self._slots is None:
            methods = [ToolCallLimit.reserve, ToolCallLimit.tally, ToolCallLimit.tally_late]
        if self._slots is None and self._total is not None and self._on_exceed == "hide":
            methods.insert(0, ToolCallLimit.keep_hidden)
        return [
            registration.bind(self)
            for method in methods
            for registration in getattr(method, "__loopware_registrations__", ())
        ]

    @dispatch_input
    def keep_hidden(self, ctx: DispatchContext) -> None:
        """Hide tools that first appeared after the total limit hid every tool (forged ones)."""
        total = self._total
        if total is not None and ctx.stash[self._total_key] >= total:
            for tool in ctx.tools.visible():
                self._hide(ctx, tool.name, None, self._total_reason(total))

    @tool_call(order=-100)
    async def reserve(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        """Deny a call beyond a limit before it runs; otherwise reserve its slot, in order."""
        stash = ctx.stash
        tool = ctx.tool_name
        if self._on_exceed == "nack":
            ended_by = self._ended_by(ctx.dispatch)
            if ended_by is not None:
                self._refuse(ctx, f"the dispatch was ended by call {ended_by!r} beyond a limit")
                return
        limit = self._limits.get(tool)
        total_limit = self._total
        if limit is None and total_limit is None:
            await call_next()
            return
        # a slot is taken before any await (parallel calls of one batch take slots in
        # proposal order) and counts at once: ``used`` holds the runs made and reserved
        if limit is not None:
            key = self._used(tool)
            if stash.increment(key) > limit:
                stash.increment(key, -1)
                self._refuse(ctx, f"the limit of {_runs(limit)} of {tool!r} per turn is used up")
                return
        if total_limit is not None and stash.increment(self._total_key) > total_limit:
            stash.increment(self._total_key, -1)
            if limit is not None:
                stash.increment(self._used(tool), -1)
            self._refuse(ctx, self._total_reason(total_limit))
            return
        try:
            await call_next()
        finally:
            if not ctx.ran or (self._count == "successes" and ctx.is_error):  # give it back
                if limit is not None:
                    stash.increment(self._used(tool), -1)
                if total_limit is not None:
                    stash.increment(self._total_key, -1)

    @tool_call(order=-100)
    async def reserve_scoped(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        """Reserve the call's slot in the turn's store before it runs; settle it after."""
        slots = self._slots
        if slots is None:  # composed only when scoped (`middleware_specs`)
            await call_next()
            return
        if self._on_exceed == "nack":
            ended_by = self._ended_by(ctx.dispatch)
            if ended_by is not None:
                self._refuse(ctx, f"the dispatch was ended by call {ended_by!r} beyond a limit")
                return
        await slots.around(ctx, call_next, self._refuse, self._hide)

    @staticmethod
    def _total_reason(total: int) -> str:
        return f"the limit of {_runs(total, 'tool run')} per turn is used up"

    def _ended_by(self, d: DispatchContext) -> str | None:
        """The id of the call with which this limit nacked ``d``, or None if it did not."""
        error = d.nack_error
        if not d.is_nacked or not isinstance(error, PolicyViolationError):
            return None
        if error.policy != self._namespace:
            return None
        call_id = error.details.get("call_id")
        return call_id if isinstance(call_id, str) else None

    def _refuse(self, ctx: ToolCallContext, reason: str, limit: LimitReading | None = None) -> None:
        tool = ctx.tool_name
        ctx.deny(reason, policy=self._namespace, limit=limit)
        d = ctx.dispatch
        if self._on_exceed == "nack" and not d.is_signalled:
            d.nack(
                PolicyViolationError(
                    f"{self._namespace}: {tool}: {reason}",
                    policy=self._namespace,
                    details={
                        "tool": tool,
                        "checksum": ctx.checksum,
                        "call_id": ctx.call_id,
                        "reason": reason,
                    },
                )
            )

    @dispatch_output
    def tally(self, ctx: DispatchContext) -> None:
        """Count the calls stored this iteration (and any missed); hide tools at their limit."""
        self._tally(ctx, ctx.unseen_tool_calls(self))

    @turn_output
    def tally_late(self, ctx: TurnContext) -> None:
        """Count calls stored after the last ``dispatch_output`` (an acking executor's)."""
        self._tally(ctx, ctx.unseen_tool_calls(self))

    def _tally(self, ctx: TurnContext | DispatchContext, calls: Sequence[ToolCall]) -> None:
        """Count the stored calls that used a slot without one; hide tools whose limit is used up.

        A call that went through the stage took its slot there (`reserve`), so only a call
        stored without crossing it (a custom executor's own record) is counted here; either
        way a tool whose runs reach its limit is hidden, once the batch is over.
        """
        stash = ctx.stash
        limits = self._limits
        total_limit = self._total
        crossed = ctx.crossed_tool_call_stage
        last: dict[str, str] = {}  # per limited tool, the last call that used a slot
        last_any: str | None = None
        successes = self._count == "successes"
        for call in calls:
            if not call.ran or (successes and call.is_error):
                continue  # it used no slot
            tool = call.tool
            reserved = crossed(call.id)
            if tool in limits:
                if not reserved:
                    stash.increment(self._used(tool))
                last[tool] = call.id
            if total_limit is not None:
                if not reserved:
                    stash.increment(self._total_key)
                last_any = call.id
        if self._on_exceed != "hide":
            return
        for tool, call_id in last.items():
            limit = limits[tool]
            if stash[self._used(tool)] >= limit:
                self._hide(ctx, tool, call_id, f"its limit of {_runs(limit)} per turn is used up")
        total = stash[self._total_key] if last_any is not None else 0
        if last_any is not None and total_limit is not None and total >= total_limit:
            for other in ctx.tools.visible():
                self._hide(ctx, other.name, last_any, self._total_reason(total_limit))

    def _hide(
        self, ctx: TurnContext | DispatchContext, tool: str, call_id: str | None, reason: str
    ) -> None:
        if ctx.tools.is_hidden(tool):
            return  # already hidden: nothing new to decide
        ctx.decide_tool(
            ToolDecision(
                tool=tool, policy=self._namespace, action="hidden", reason=reason, call_id=call_id
            )
        )


def _runs(n: int, what: str = "run") -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


ToolCallLimit.__module__ = "middleware"
