"""`RepetitionDetector`: stops a model that repeats the same call or oscillates between two."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection
from typing import Literal

from pipeline import CallNext, DispatchContext, PolicyViolationError, ToolCall

from ._decisions import Action, record_decision
from ._options import check_choice, check_int, check_names, check_namespace
from ._registration import dispatch_output

__all__ = ["RepetitionDetector"]

OnRepeat = Literal["hide", "nack", "warn"]

_ACTIONS: tuple[OnRepeat, ...] = ("hide", "nack", "warn")
_DECISION: dict[OnRepeat, Action] = {"hide": "hidden", "nack": "denied", "warn": "warned"}


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

    * ``"hide"``: hide the tool (both tools for an oscillation) in the turn's registry for the
      rest of the turn, so the model is no longer offered it; the next turn starts fresh;
    * ``"nack"``: end the dispatch with `PolicyViolationError` (stored calls are kept);
    * ``"warn"``: only record and log.

    Every trigger is recorded under ``<namespace>.decisions`` and emitted as a
    ``policy.decision`` log. Calls to tools in ``exempt`` (polling, say) are ignored entirely.
    The recent checksums for oscillation live at ``<namespace>.recent``.

    Args:
        threshold: How many identical calls trigger (at least 2).
        window: How many recent calls to search for an oscillation (at least 4); None turns
            oscillation detection off.
        on_repeat: ``"hide"``, ``"nack"`` or ``"warn"``.
        exempt: Tools never flagged: names or globs (``"poll*"``), as `ToolPolicy` takes.
        namespace: The stash path of its state and decisions.

    Raises:
        InvalidMiddlewareConfigError: any option is out of range or of the wrong type.
    """

    __slots__ = (
        "_exempt",
        "_exempt_match",
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
        on_repeat: OnRepeat = "hide",
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

    @dispatch_output
    async def check(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Check the calls completed in this iteration for repeats and oscillation."""
        flagged: set[str] = set()
        for call in ctx.new_tool_calls:
            if self._is_exempt(call.tool):
                continue
            count = ctx.tool_call_count(call.checksum)
            if count >= self._threshold and call.checksum not in flagged:
                flagged.add(call.checksum)
                self._act(
                    ctx, call, f"identical call made {count} times (threshold {self._threshold})"
                )
            if self._window is not None:
                self._check_oscillation(ctx, call, self._window)
        await call_next()

    def _check_oscillation(self, ctx: DispatchContext, call: ToolCall, window: int) -> None:
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
        reason = (
            f"oscillating between two calls ({other_tool} and {call.tool}) within the last "
            f"{window} calls"
        )
        self._act(ctx, call, reason, other=(other_tool, other_checksum))

    def _act(
        self,
        ctx: DispatchContext,
        call: ToolCall,
        reason: str,
        other: tuple[str, str] | None = None,
    ) -> None:
        action = self._on_repeat
        tools = [call.tool] if other is None or other[0] == call.tool else [other[0], call.tool]
        if action == "hide":
            ctx.tools.hide(*tools)
        elif action == "nack" and not ctx.is_signalled:
            ctx.nack(
                PolicyViolationError(
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
            )
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


RepetitionDetector.__module__ = "middleware"
