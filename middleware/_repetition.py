"""`RepetitionDetector`: stops a model that repeats the same call or oscillates between two."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection
from typing import Final, Literal

from pipeline import DispatchContext
from pipeline.calls import ToolCallContext, ToolCallNext, ToolDecision
from pipeline.errors import PolicyViolationError
from pipeline.stages import MiddlewareSpec

from ._options import check_choice, check_int, check_names, check_namespace
from ._registration import dispatch_output, tool_call

__all__ = ["RepetitionDetector"]

OnRepeat = Literal["block", "hide", "nack", "warn"]

_ACTIONS: tuple[OnRepeat, ...] = ("block", "hide", "nack", "warn")


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


_AFTER: Final = {
    "hide": "the tool is being hidden: ",
    "nack": "the dispatch is ending: ",
}
"""What a call after the one that triggered ``hide`` or ``nack`` in its batch reads."""


class RepetitionDetector:
    """Act when a model repeats the same call, or oscillates between two calls.

    Calls are compared by tool and *validated* arguments (defaults applied, canonical JSON:
    `ToolCallContext.validated_checksum`), so ``{"q": "x"}`` and ``{"q": "x", "limit": 10}``
    are the same call when ``limit`` defaults to 10. A call that would be the ``threshold``-th
    identical one (stored calls of the turn and its conversation, and calls of the current
    batch already let through) triggers ``on_repeat``. With ``window`` set, an ``A, B, A, B``
    alternation among the last ``window`` calls triggers it too (``A`` and ``B`` distinct).
    Everything is judged in the ``tool_call`` stage, on the exact call, before its handler runs
    (``order=-90``); identical calls in one batch count as they are judged
    (`ToolCallContext.identical_calls`), so a batch cannot run past the threshold. Actions:

    * ``"block"`` (the default): deny the triggering call; the model reads why;
    * ``"warn"``: let it run with a ``"warned"`` decision on its record;
    * ``"hide"``: let it run, then hide the tool (both tools of an oscillation) for the rest
      of the turn: a `ToolDecision` the model reads when it calls the tool again; later calls
      of the tool in the same batch are denied;
    * ``"nack"``: let it run, then end the dispatch with `PolicyViolationError`; later calls
      of the same batch are denied.

    After an oscillation triggered without blocking, the same alternation must recur in full
    to trigger again. Calls to tools in ``exempt`` (polling, say) are ignored entirely. The
    loop counts the calls; what the detector keeps lives in the stash under ``namespace``:
    ``recent`` (the oscillation window, with ``window`` set) and ``triggered`` (a ``"hide"`` or
    ``"nack"`` trigger, for the rest of its batch).

    Args:
        threshold: How many identical calls trigger (at least 2).
        window: How many recent calls to search for an oscillation (at least 4); None turns
            oscillation detection off.
        on_repeat: ``"block"``, ``"hide"``, ``"nack"`` or ``"warn"``.
        exempt: Tools never flagged: names or globs (``"poll*"``), as `ToolPolicy` takes.
        namespace: The stash path of its state, and its name in decisions.

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
        "_triggered",
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
        self._triggered = f"{namespace}.triggered"

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
        """The stash path of its state, and its name in decisions."""
        return self._namespace

    def middleware_specs(self) -> list[MiddlewareSpec]:
        """This instance's stage middleware (``pipeline.stages.MiddlewareProvider``).

        With ``"block"`` or ``"warn"`` everything is decided before the call runs, so the
        ``tool_call`` hook is `watch`, a check the call crosses in line; ``"hide"`` and
        ``"nack"`` act after the call that triggered them, so theirs is `watch_around`, which
        wraps it, and `settle` forgets their triggers when the batch is over. The calls are
        counted by the loop (`ToolCallContext.identical_calls`): ``"block"`` and ``"warn"``
        keep no per-call state and compose no other stage.
        """
        methods = (
            (RepetitionDetector.watch_around, RepetitionDetector.settle)
            if self._on_repeat in _AFTER
            else (RepetitionDetector.watch,)
        )
        return [
            registration.bind(self)
            for method in methods
            for registration in getattr(method, "__loopware_registrations__", ())
        ]

    @tool_call(order=-90)
    def watch(self, ctx: ToolCallContext) -> None:
        """Judge a call before it runs: a repeat or an oscillation triggers ``on_repeat``.

        The whole of ``"block"`` and ``"warn"``, and the first half of `watch_around`.
        """
        self._judge(ctx)

    @tool_call(order=-90)
    async def watch_around(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        """Judge a call (`watch`); after one that triggered ``"hide"`` or ``"nack"``, act."""
        trigger = self._judge(ctx)
        if ctx.denied is not None:
            return
        await call_next()
        if trigger is None:
            return
        reason, tools = trigger
        d = ctx.dispatch
        if self._on_repeat == "hide":
            for name in tools:
                if not d.tools.is_hidden(name):
                    d.decide_tool(
                        ToolDecision(
                            tool=name,
                            policy=self._namespace,
                            action="hidden",
                            reason=reason,
                            call_id=ctx.call_id,
                        )
                    )
        elif self._on_repeat == "nack" and not d.is_signalled:
            d.nack(
                PolicyViolationError(
                    f"{self._namespace}: {ctx.tool_name}: {reason}",
                    policy=self._namespace,
                    details={
                        "tool": ctx.tool_name,
                        "checksum": ctx.checksum,
                        "validated_checksum": ctx.validated_checksum,
                        "call_id": ctx.call_id,
                        "tools": list(tools),
                        "reason": reason,
                    },
                )
            )

    def _judge(self, ctx: ToolCallContext) -> tuple[str, tuple[str, ...]] | None:
        """Deny, warn about or let through one call; return what ``hide``/``nack`` act on.

        Returns the reason and the tools of a trigger whose action comes after the call runs
        (``"hide"``, ``"nack"``), else None.
        """
        tool = ctx.tool_name
        if self._exempt_match is not None and self._exempt_match(tool) is not None:
            return None  # an exempt tool (one compiled alternation of the globs)
        if self._on_repeat in _AFTER:
            # a call that triggered "hide" or "nack" left [entry, call_id, action, reason,
            # *tools] here: the calls after it in the iteration (a batch) are refused, not run
            # past the threshold (the trigger acts only once the call that fired it returns)
            for item in ctx.stash.get(self._triggered) or ():
                if item[2] == "nack" or tool in item[4:]:
                    ctx.deny(_AFTER[item[2]] + item[3], policy=self._namespace)
                    return None
        # the stored calls and the batch's calls judged before this one: no state of its own
        count = ctx.identical_calls + 1
        window = self._window
        if count < self._threshold and window is None:
            return None  # nothing to say: the common case, no state touched
        stash = ctx.stash
        vchecksum = ctx.validated_checksum
        entry = f"{tool}:{vchecksum}"
        reason = None
        oscillated = False
        tools: tuple[str, ...] = (tool,)
        if count >= self._threshold:
            made = "would be made" if self._on_repeat == "block" else "was made"
            reason = f"the same call {made} {count} times (threshold {self._threshold})"
        elif window is not None:
            recent: list[str] = stash.get(self._recent) or []
            found = find_oscillation([*recent, entry][-window:]) if len(recent) >= 3 else None
            if found is not None:
                other_tool, _, other = found.partition(":")
                reason = self._oscillation_reason(other_tool, other, tool, vchecksum, window)
                if other_tool != tool:
                    tools = (other_tool, tool)
                oscillated = True
        action = self._on_repeat
        if reason is not None and action == "block":
            ctx.deny(reason, policy=self._namespace)
            return None
        if oscillated:
            stash.set(self._recent, [])  # the same alternation must recur in full to trigger
        elif window is not None:
            self._remember(ctx, entry, window)
        if reason is None:
            return None
        if action == "warn":
            ctx.warn(reason, policy=self._namespace)
            return None
        # it runs; "hide" and "nack" act after it (a tool decision, the nack error)
        stash.append(self._triggered, [entry, ctx.call_id, action, reason, *tools])
        return reason, tools

    def _remember(self, ctx: ToolCallContext, entry: str, window: int) -> None:
        """Add a call let through to the oscillation window."""
        recent: list[str] = ctx.stash.get(self._recent) or []
        recent.append(entry)
        if len(recent) > window:
            del recent[: len(recent) - window]
        ctx.stash.set(self._recent, recent)

    @staticmethod
    def _oscillation_reason(
        other_tool: str, other_checksum: str, tool: str, checksum: str, window: int
    ) -> str:
        if other_tool == tool:
            what = (
                f"two calls of {tool} with different arguments "
                f"({other_checksum[:8]} and {checksum[:8]})"
            )
        else:
            what = f"two calls ({other_tool} and {tool})"
        return f"oscillating between {what} within the last {window} calls"

    @dispatch_output
    def settle(self, ctx: DispatchContext) -> None:
        """Forget the iteration's triggers (``"hide"``, ``"nack"``): its batch is over."""
        if ctx.stash.has(self._triggered):
            ctx.stash.delete(self._triggered)


RepetitionDetector.__module__ = "middleware"
