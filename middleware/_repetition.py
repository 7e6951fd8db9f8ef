"""`RepetitionDetector`: stops a model that repeats the same call or oscillates between two."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Sequence
from typing import Literal

from pipeline import (
    CallNext,
    DispatchContext,
    MiddlewareSpec,
    PolicyViolationError,
    ToolCall,
    ToolCallContext,
    ToolCallNext,
    TurnContext,
)

from ._decisions import Action, deny_call, record_decision
from ._options import check_choice, check_int, check_names, check_namespace
from ._registration import dispatch_output, tool_call, turn_output

__all__ = ["RepetitionDetector"]

OnRepeat = Literal["block", "hide", "nack", "warn"]

_ACTIONS: tuple[OnRepeat, ...] = ("block", "hide", "nack", "warn")
_DECISION: dict[OnRepeat, Action] = {
    "block": "denied",
    "hide": "hidden",
    "nack": "denied",
    "warn": "warned",
}


def find_oscillation(recent: list[str]) -> str | None:
    """Return the ``A`` of an ``A, B, A, B`` pattern ending at the last entry ``B``, if any.

    The four entries need not be adjacent: any ``A ... B ... A ... B`` subsequence of
    ``recent`` whose last ``B`` is the newest entry counts, with ``A != B``. One backward pass.
    """
    newest = recent[-1]
    seen_once: set[str] = set()  # A seen after (later than) nothing but itself so far
    seen_with_b: set[str] = set()  # A seen with a B between it and the newest entry
    for entry in reversed(recent[:-1]):
        if entry == newest:
            seen_with_b |= seen_once
            seen_once.clear()
        elif entry in seen_with_b:
            return entry
        else:
            seen_once.add(entry)
    return None


class RepetitionDetector:
    """Act when a model repeats an identical call, or oscillates between two calls.

    A call whose checksum (tool and raw arguments) has been stored ``threshold`` times
    (``ctx.tool_call_count``, history of the conversation included) triggers ``on_repeat``. With
    ``window`` set, an ``A, B, A, B`` alternation among the last ``window`` calls of the turn
    triggers it too (``A`` and ``B`` being distinct checksums). Actions:

    * ``"block"`` (the default): in the ``tool_call`` stage, before the handler runs, deny the
      call that would reach the threshold (or complete the oscillation); identical calls in one
      batch count as they pass, so a batch cannot run past it. The model reads why;
    * ``"hide"``: after the fact, hide the tool (both tools for an oscillation) in the turn's
      registry for the rest of the turn, so it is no longer offered or callable;
    * ``"nack"``: after the fact, end the dispatch with `PolicyViolationError`;
    * ``"warn"``: only record and log.

    Every trigger is recorded under ``<namespace>.decisions`` and emitted as a
    ``policy.decision`` log. Calls to tools in ``exempt`` (polling, say) are ignored entirely.
    The recent checksums for oscillation live at ``<namespace>.recent``. Calls of an iteration
    whose ``dispatch_output`` did not run (an executor that stored calls and acked at once) are
    checked in ``turn_output``; there the dispatch is already acked, so ``"nack"`` fails the
    turn with `PolicyViolationError` instead.

    Args:
        threshold: How many identical calls trigger (at least 2).
        window: How many recent calls to search for an oscillation (at least 4); None turns
            oscillation detection off.
        on_repeat: ``"block"``, ``"hide"``, ``"nack"`` or ``"warn"``.
        exempt: Tools never flagged: names or globs (``"poll*"``), as `ToolPolicy` takes.
        namespace: The stash path of its state and decisions.

    Raises:
        InvalidMiddlewareConfigError: any option is out of range or of the wrong type.
    """

    __slots__ = (
        "_blocked",
        "_exempt",
        "_exempt_match",
        "_inflight",
        "_namespace",
        "_on_repeat",
        "_recent",
        "_threshold",
        "_window",
    )

    def __init__(
        self,
        threshold: int = 3,
        window: int | None = None,
        on_repeat: OnRepeat = "block",
        exempt: Collection[str] = (),
        *,
        namespace: str = "loopware.repetition",
    ) -> None:
        """Configure the detector (see the class docstring)."""
        owner = "RepetitionDetector"
        self._threshold = check_int(owner, "threshold", threshold, minimum=2)
        self._window = None if window is None else check_int(owner, "window", window, minimum=4)
        self._on_repeat = check_choice(owner, "on_repeat", on_repeat, _ACTIONS)
        self._exempt = frozenset(check_names(owner, "exempt", exempt))
        # one compiled alternation of the globs, matched once per call (fnmatchcase semantics)
        self._exempt_match = (
            re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in sorted(self._exempt))).match
            if self._exempt
            else None
        )
        self._namespace = check_namespace(owner, namespace)
        self._recent = f"{namespace}.recent"
        self._inflight = f"{namespace}.inflight"
        self._blocked = f"{namespace}.blocked"

    def __repr__(self) -> str:
        """Show the configuration."""
        return (
            f"RepetitionDetector(threshold={self._threshold}, window={self._window}, "
            f"on_repeat={self._on_repeat!r}, exempt={sorted(self._exempt)!r}, "
            f"namespace={self._namespace!r})"
        )

    @property
    def threshold(self) -> int:
        """How many identical calls trigger the action."""
        return self._threshold

    @property
    def window(self) -> int | None:
        """How many recent calls are searched for an oscillation (None: off)."""
        return self._window

    @property
    def on_repeat(self) -> OnRepeat:
        """The action taken."""
        return self._on_repeat

    @property
    def exempt(self) -> frozenset[str]:
        """Tools never flagged."""
        return self._exempt

    @property
    def namespace(self) -> str:
        """The stash path of its state and decisions."""
        return self._namespace

    def _is_exempt(self, tool: str) -> bool:
        """True when ``tool`` matches an ``exempt`` glob (a plain name matches only itself)."""
        return self._exempt_match is not None and self._exempt_match(tool) is not None

    def middleware_specs(self) -> list[MiddlewareSpec]:
        """This instance's stage middleware (``pipeline.MiddlewareProvider``).

        ``block`` is composed only for ``on_repeat="block"``: the other actions act after the
        fact and keep the per-call stage off the hot path.
        """
        methods: list[object] = [RepetitionDetector.check, RepetitionDetector.check_late]
        if self._on_repeat == "block":
            methods.insert(0, RepetitionDetector.block)
        return [
            registration.bind(self)
            for method in methods
            for registration in getattr(method, "__loopware_registrations__", ())
        ]

    @tool_call(order=-90)
    async def block(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        """Deny, before it runs, a call that would reach the threshold or an oscillation.

        Calls let through count as in flight until they are stored (then
        ``tool_call_count`` counts them), so a sequential batch and a parallel one allow the
        same number of runs.
        """
        tool = ctx.tool_name
        if self._is_exempt(tool):
            await call_next()
            return
        stash = ctx.stash
        entry = f"{tool}:{ctx.checksum}"
        # [entry, call_id] of the calls let through this iteration; once stored, a call is
        # counted by tool_call_count, so only those not stored yet are added (no double count)
        inflight: list[list[str]] = stash.get(self._inflight) or []
        stored = ctx.dispatch.get_tool_call
        pending = sum(1 for e, cid in inflight if e == entry and stored(cid) is None)
        count = ctx.dispatch.tool_call_count(ctx.checksum) + pending + 1
        reason = None
        other = None
        if count >= self._threshold:
            reason = f"identical call would be made {count} times (threshold {self._threshold})"
        elif self._window is not None:
            recent: list[str] = stash.get(self._recent) or []
            window = [*recent, *(e for e, _ in inflight), entry][-self._window :]
            found = find_oscillation(window) if len(window) >= 4 else None
            if found is not None:
                other = found.partition(":")[::2]
                reason = self._oscillation_reason(other, tool, ctx.checksum, self._window)
        if reason is None:
            stash.append(self._inflight, [entry, ctx.call_id])
            await call_next()
            return
        stash.append(self._blocked, ctx.call_id)
        deny_call(
            ctx,
            self._namespace,
            reason,
            message=f"repetition: {tool}: {reason}; the call was not run",
        )

    @staticmethod
    def _oscillation_reason(other: tuple[str, str], tool: str, checksum: str, window: int) -> str:
        other_tool, other_checksum = other
        if other_tool == tool:
            what = (
                f"two calls of {tool} with different arguments "
                f"({other_checksum[:8]} and {checksum[:8]})"
            )
        else:
            what = f"two calls ({other_tool} and {tool})"
        return f"oscillating between {what} within the last {window} calls"

    @dispatch_output
    async def check(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Check the calls stored in this iteration (and any missed) for repeats and oscillation."""
        self._check(ctx, ctx.unseen_tool_calls(self))
        await call_next()

    @turn_output
    async def check_late(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Check calls stored after the last ``dispatch_output`` (an acking executor's).

        Raises:
            PolicyViolationError: ``on_repeat="nack"`` and one of them triggered.
        """
        self._check(ctx, ctx.unseen_tool_calls(self))
        await call_next()

    def _check(self, ctx: TurnContext | DispatchContext, calls: Sequence[ToolCall]) -> None:
        blocking = self._on_repeat == "block"
        blocked: set[str] = set()
        if blocking:  # every call in flight is now stored
            stash = ctx.stash
            if self._window is not None:
                blocked = set(stash.get(self._blocked) or ())
            stash.delete(self._inflight)
            stash.delete(self._blocked)
        flagged: set[str] = set()
        for call in calls:
            if self._is_exempt(call.tool):
                continue
            if blocking:  # repeats were denied before they ran; keep the oscillation window
                if self._window is not None and call.id not in blocked:
                    self._remember(ctx, call, self._window)
                continue
            count = ctx.tool_call_count(call.checksum)
            if count >= self._threshold and call.checksum not in flagged:
                flagged.add(call.checksum)
                self._act(
                    ctx, call, f"identical call made {count} times (threshold {self._threshold})"
                )
            if self._window is not None:
                self._check_oscillation(ctx, call, self._window)

    def _remember(self, ctx: TurnContext | DispatchContext, call: ToolCall, window: int) -> None:
        """Add a stored call (one this detector did not block) to the recent window."""
        recent: list[str] = ctx.stash.get(self._recent) or []
        recent.append(f"{call.tool}:{call.checksum}")
        if len(recent) > window:
            del recent[: len(recent) - window]
        ctx.stash.set(self._recent, recent)

    def _check_oscillation(
        self, ctx: TurnContext | DispatchContext, call: ToolCall, window: int
    ) -> None:
        entry = f"{call.tool}:{call.checksum}"
        recent: list[str] = ctx.stash.get(self._recent) or []
        recent.append(entry)
        if len(recent) > window:
            del recent[: len(recent) - window]
        other = find_oscillation(recent) if len(recent) >= 4 else None
        if other is None:
            ctx.stash.set(self._recent, recent)
            return
        ctx.stash.set(self._recent, [])  # the same alternation must recur in full to trigger again
        other_tool, _, other_checksum = other.partition(":")
        reason = self._oscillation_reason(
            (other_tool, other_checksum), call.tool, call.checksum, window
        )
        self._act(ctx, call, reason, other=(other_tool, other_checksum))

    def _act(
        self,
        ctx: TurnContext | DispatchContext,
        call: ToolCall,
        reason: str,
        other: tuple[str, str] | None = None,
    ) -> None:
        action = self._on_repeat
        tools = [call.tool] if other is None or other[0] == call.tool else [other[0], call.tool]
        if action == "hide" and all(ctx.tools.is_hidden(t) for t in tools):
            return  # already hidden: the registry refused this call before it ran
        violation: PolicyViolationError | None = None
        if action == "hide":
            ctx.tools.hide(*tools)
        elif action == "nack":
            violation = PolicyViolationError(
                f"repetition: {call.tool}: {reason}",
                policy=self._namespace,
                details={
                    "tool": call.tool,
                    "checksum": call.checksum,
                    "call_id": call.id,
                    "tools": tools,
                    "reason": reason,
                },
            )
            if isinstance(ctx, DispatchContext):
                if not ctx.is_signalled:
                    ctx.nack(violation)
                violation = None
        elif action == "warn":
            ctx.log.warning(
                "repetition", f"{call.tool}: {reason}", tool=call.tool, checksum=call.checksum
            )
        decided = _DECISION[action]
        record_decision(
            ctx,
            self._namespace,
            tool=call.tool,
            checksum=call.checksum,
            call_id=call.id,
            action=decided,
            reason=reason,
        )
        if other is not None and action == "hide" and other[0] != call.tool:
            record_decision(
                ctx,
                self._namespace,
                tool=other[0],
                checksum=other[1],
                call_id=None,
                action=decided,
                reason=reason,
            )
        if violation is not None:  # after the dispatch (turn output): fail the turn
            raise violation


RepetitionDetector.__module__ = "middleware"
