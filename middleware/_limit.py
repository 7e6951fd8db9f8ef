"""`ToolCallLimit`: caps completed calls per tool and in total within a turn, before they run."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Literal

from pipeline import (
    CallNext,
    DispatchContext,
    InvalidMiddlewareConfigError,
    MiddlewareSpec,
    PolicyViolationError,
    StashKey,
    ToolCall,
    ToolCallContext,
    ToolCallNext,
    TurnContext,
)

from ._decisions import deny_call, record_decision
from ._keys import CountKeys, bump
from ._options import check_choice, check_int, check_namespace
from ._registration import dispatch_input, dispatch_output, tool_call, turn_output

__all__ = ["ToolCallLimit"]

OnExceed = Literal["hide", "nack"]

_ACTIONS: tuple[OnExceed, ...] = ("hide", "nack")
_NO_LIMITS: Mapping[str, int] = MappingProxyType({})
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tool name can be (``Tool``'s rule): anything else could never be limited."""


class ToolCallLimit:
    """Cap how many calls per tool (and in total) complete within one turn, before they run.

    Enforcement happens in the ``tool_call`` stage, on the exact call: a call beyond a limit is
    denied before its handler runs (the model reads why). A call reserves its slot as it passes
    the stage, so within one batch of parallel calls slots go in proposal order: limit 3 with
    10 calls in one batch means exactly 3 handler runs. The hook is registered outermost
    (``order=-100``) so no other hook can await before the reservation.

    Completed calls (``is_error=False``) use up the limits; failed or denied calls give their
    slot back and are counted apart. With ``on_exceed="hide"`` a tool is also hidden from the
    model once it has completed its limit (all tools once ``total`` is reached), for the rest
    of the turn, even tools registered later such as forged artifact tools. With
    ``on_exceed="nack"`` the call beyond the limit is denied and the dispatch ends with
    `PolicyViolationError`; the rest of the batch does not run (every later call reaching the
    stage is denied, whatever its tool).

    Stash layout under ``namespace`` (default ``loopware.limit``): ``completed.<tool>`` and
    ``failed.<tool>`` for each tool with a limit, ``total`` (completed calls of every tool,
    kept when ``total`` is set), ``pending.<tool>`` and ``pending_total`` (slots reserved by
    calls of the current iteration not yet counted), ``exhausted`` (tools hidden for their own
    limit) and ``decisions``. Calls stored without passing the stage (a custom executor that
    builds its own records) are still counted after the fact in ``dispatch_output``, and calls
    of an iteration whose ``dispatch_output`` did not run (an executor that stored calls and
    acked at once) in ``turn_output``. (`ToolCallCounter` counts every tool.)

    Args:
        limits: Tool name to the most completed calls allowed (at least 1).
        total: The most completed calls allowed across all tools, or None.
        on_exceed: ``"hide"`` or ``"nack"``.
        namespace: The stash path of its counts and decisions.

    Raises:
        InvalidMiddlewareConfigError: no limit at all, a key that is not a tool name (a glob
            such as ``"search*"`` included) or a bad limit, or another option out of range.
    """

    __slots__ = (
        "_completed",
        "_exhausted",
        "_failed",
        "_limits",
        "_namespace",
        "_on_exceed",
        "_pending",
        "_pending_prefix",
        "_pending_total",
        "_total",
        "_total_key",
    )

    def __init__(
        self,
        limits: Mapping[str, int] = _NO_LIMITS,
        total: int | None = None,
        on_exceed: OnExceed = "hide",
        *,
        namespace: str = "loopware.limit",
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
        self._namespace = check_namespace(owner, namespace)
        self._completed = CountKeys(f"{namespace}.completed.")
        self._failed = CountKeys(f"{namespace}.failed.")
        self._pending = CountKeys(f"{namespace}.pending.")
        self._pending_prefix = f"{namespace}.pending"
        self._total_key = StashKey[int](f"{namespace}.total", default=0)
        self._pending_total = StashKey[int](f"{namespace}.pending_total", default=0)
        self._exhausted = f"{namespace}.exhausted"

    def __repr__(self) -> str:
        """Show the configuration."""
        return (
            f"ToolCallLimit({dict(self._limits)!r}, total={self._total}, "
            f"on_exceed={self._on_exceed!r}, namespace={self._namespace!r})"
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
    def namespace(self) -> str:
        """The stash path of its counts and decisions."""
        return self._namespace

    def middleware_specs(self) -> list[MiddlewareSpec]:
        """This instance's stage middleware (``pipeline.MiddlewareProvider``).

        ``keep_hidden`` is composed only when ``on_exceed="hide"`` and ``total`` is set: a
        per-tool hidden mark already survives re-forging, so only "hide every tool" needs to
        catch tools that first appear later in the turn. Leaving it out otherwise keeps a
        whole stage off the per-iteration path.
        """
        methods: list[object] = [
            ToolCallLimit.reserve,
            ToolCallLimit.count,
            ToolCallLimit.count_late,
        ]
        if self._total is not None and self._on_exceed == "hide":
            methods.insert(0, ToolCallLimit.keep_hidden)
        return [
            registration.bind(self)
            for method in methods
            for registration in getattr(method, "__loopware_registrations__", ())
        ]

    @dispatch_input
    async def keep_hidden(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Re-hide tools that first appeared after the limit hid them (forged ones)."""
        stash = ctx.stash
        exhausted: list[str] | None = stash.get(self._exhausted)
        if exhausted:
            ctx.tools.hide(*exhausted)
        if self._total is not None and stash[self._total_key] >= self._total:
            ctx.tools.hide(*(tool.name for tool in ctx.tools.visible()))
        await call_next()

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
        # reserved before any await: parallel calls of one batch take slots in proposal order
        if limit is not None:
            used = stash.increment(self._pending(tool)) + stash[self._completed(tool)]
            if used > limit:
                stash.increment(self._pending(tool), -1)
                self._refuse(ctx, f"{used} of {limit} calls allowed")
                return
        if total_limit is not None:
            used = stash.increment(self._pending_total) + stash[self._total_key]
            if used > total_limit:
                stash.increment(self._pending_total, -1)
                if limit is not None:
                    stash.increment(self._pending(tool), -1)
                self._refuse(ctx, f"{used} of {total_limit} calls allowed in total")
                return
        record = None
        try:
            record = await call_next()
        finally:
            if record is None or record.is_error:  # failed, denied or raised: give it back
                if limit is not None:
                    stash.increment(self._pending(tool), -1)
                if total_limit is not None:
                    stash.increment(self._pending_total, -1)

    def _ended_by(self, d: DispatchContext) -> str | None:
        """The id of the call with which this limit nacked ``d``, or None if it did not."""
        error = d.nack_error
        if not d.is_nacked or not isinstance(error, PolicyViolationError):
            return None
        if error.policy != self._namespace:
            return None
        call_id = error.details.get("call_id")
        return call_id if isinstance(call_id, str) else None

    def _refuse(self, ctx: ToolCallContext, reason: str) -> None:
        tool = ctx.tool_name
        deny_call(
            ctx, self._namespace, reason, message=f"limit: {tool}: {reason}; the call was not run"
        )
        d = ctx.dispatch
        if self._on_exceed == "nack" and not d.is_signalled:
            d.nack(
                PolicyViolationError(
                    f"limit: {tool}: {reason}",
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
    async def count(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Count the calls stored this iteration (and any missed); hide tools at their limit."""
        self._count(ctx, ctx.unseen_tool_calls(self))
        await call_next()

    @turn_output
    async def count_late(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Count calls stored after the last ``dispatch_output`` (an acking executor's)."""
        self._count(ctx, ctx.unseen_tool_calls(self))
        await call_next()

    def _count(self, ctx: TurnContext | DispatchContext, calls: Sequence[ToolCall]) -> None:
        """Count stored calls, hide tools whose limit is reached, drop the reservations."""
        stash = ctx.stash
        limits = self._limits
        total_limit = self._total
        for call in calls:
            tool = call.tool
            limit = limits.get(tool)
            if call.is_error:
                if limit is not None:
                    bump(stash, self._failed(tool))
                continue
            if limit is not None:
                count = bump(stash, self._completed(tool))
                if count >= limit and self._on_exceed == "hide":
                    self._hide(
                        ctx, tool, call.checksum, call.id, f"{count} of {limit} calls allowed"
                    )
            if total_limit is not None:
                total = bump(stash, self._total_key)
                if total >= total_limit and self._on_exceed == "hide":
                    self._hide(
                        ctx,
                        tool,
                        call.checksum,
                        call.id,
                        f"{total} of {total_limit} calls allowed in total",
                        every_tool=True,
                    )
        # every reservation of this iteration is now a stored (and counted) call
        if limits:
            stash.delete(self._pending_prefix)
        if total_limit is not None:
            stash.delete(self._pending_total.path)

    def _hide(
        self,
        ctx: TurnContext | DispatchContext,
        tool: str,
        checksum: str,
        call_id: str,
        reason: str,
        *,
        every_tool: bool = False,
    ) -> None:
        tools = ctx.tools
        if every_tool:
            names = [t.name for t in tools.visible()]
        else:
            names = [tool] if not tools.is_hidden(tool) else []
            exhausted: list[str] = ctx.stash.get(self._exhausted) or []
            if tool not in exhausted:
                ctx.stash.set(self._exhausted, [*exhausted, tool])
        if not names:
            return  # already hidden: nothing new to decide
        tools.hide(*names)
        record_decision(
            ctx,
            self._namespace,
            tool=tool,
            checksum=checksum,
            call_id=call_id,
            action="hidden",
            reason=reason,
        )


ToolCallLimit.__module__ = "middleware"
