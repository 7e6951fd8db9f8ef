"""What was decided about a call (`Decision`) or about a tool (`ToolDecision`), and the verdict.

A `Decision` is appended to a call's run by whoever decided (a policy's ``ctx.deny``, an
approval, the loop itself refusing a call it cannot run) and ends up on the stored
`ToolCall` as ``call.decisions``, in the order they were taken. `verdict` reads them into the
one word the audit row, ``loopware run``, replay and tracing all show for the call.

A `ToolDecision` is about a tool, not a call: a limit or a repetition policy hiding it for the
rest of the turn, a policy withdrawing it from the turn's registry. It is kept by the turn
(``TurnResult.tool_decisions``), emitted as `ToolDecided` and audited as a row of its own, and
the model reads it when it calls the tool again. See ``docs/architecture.md``, "One call".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "SETTLING",
    "Decision",
    "DecisionAction",
    "DecisionWhen",
    "LimitReading",
    "ToolDecision",
    "ToolDecisionAction",
    "Verdict",
    "verdict",
]

DecisionAction: TypeAlias = Literal[
    "approved",
    "warned",
    "rewritten",
    "answered",
    "denied",
    "rejected",
    "invalid",
    "failed",
    "aborted",
]
"""What was decided about one call:

- ``"approved"``: an approver said yes; ``"warned"``: a policy noted the call and let it run;
  ``"rewritten"``: a hook replaced the arguments the handler receives;
- ``"answered"``: a hook answered in place of the handler (or replaced its outcome);
- ``"denied"``: a policy refused the call (or, after the handler ran, withheld its result);
- ``"rejected"``: an approver said no (or the approval timed out or was aborted);
- ``"invalid"``: the call could not run as proposed (arguments that are not a JSON object or fail
  the tool's schema, a name no tool has);
- ``"failed"``: a ``tool_call`` hook raised or returned without deciding, so the call did not run;
- ``"aborted"``: the turn was aborted before or while the call ran.
"""

DecisionWhen: TypeAlias = Literal["before", "after"]
"""Whether a decision was taken before the handler ran (or instead of it) or after it ran."""

ToolDecisionAction: TypeAlias = Literal["hidden", "withdrawn"]
"""What was decided about a tool: hidden for the rest of the turn (still registered), or
withdrawn from the turn's registry (a policy refused it)."""

Verdict: TypeAlias = Literal[
    "allowed",
    "warned",
    "approved",
    "answered",
    "denied",
    "rejected",
    "invalid",
    "failed",
    "aborted",
    "not_run",
]
"""The one word for a call: what the deciding decision did, else ``"approved"`` or
``"warned"`` when one was taken, else ``"allowed"`` when the handler ran and ``"not_run"``
when it did not (a record built by hand that names no decision)."""

SETTLING: Final = frozenset({"answered", "denied", "rejected", "invalid", "failed", "aborted"})
"""Actions that settle a call's outcome (the last one taken is the verdict)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitReading:
    """What a counting limit read when it refused: its scope, key, count and limit.

    Kept on the refusal's `Decision` (and so in the call's record and its audit row's
    ``decisions``), so an auditor sees which count refused the call, not only the words.

    Example::

        LimitReading(scope="key", key="cust-7", counter="refund", count=3, limit=3,
                     window_s=86400.0)
    """

    scope: str
    """``"turn"``, ``"conversation"`` or ``"key"`` (a key the policy derived from the turn)."""
    key: str
    """The turn id, the conversation id or the derived key."""
    counter: str
    """What was counted: a tool's name, ``"*"`` for every tool, ``"model_calls"``, ``"tokens"``."""
    count: int
    """How much the count held when the limit refused."""
    limit: int
    """The limit."""
    window_s: float | None = None
    """The rolling window in seconds, or None (the count never rolls)."""

    def as_dict(self) -> dict[str, str | int | float | None]:
        """The reading as plain JSON data."""
        return {
            "scope": self.scope,
            "key": self.key,
            "counter": self.counter,
            "count": self.count,
            "limit": self.limit,
            "window_s": self.window_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LimitReading:
        """The reading `as_dict` wrote."""
        window = data.get("window_s")
        return cls(
            scope=str(data["scope"]),
            key=str(data["key"]),
            counter=str(data["counter"]),
            count=int(data["count"]),
            limit=int(data["limit"]),
            window_s=None if window is None else float(window),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One decision about one call, as it is kept on the call's record.

    Example::

        Decision(policy="loopware.policy", action="denied",
                 reason="matches deny pattern 'shell'", when="before")
    """

    policy: str
    """Who decided: a middleware's namespace or name (``"loopware.limit"``), or the loop itself
    (``"loopware.registry"``, ``"loopware.arguments"``, ``"loopware.executor"``,
    ``"loopware.turn"``)."""
    action: DecisionAction
    """What was decided (see `DecisionAction`)."""
    reason: str
    """Why, in the policy's words (what the model and the audit read)."""
    when: DecisionWhen = "before"
    """``"before"`` when taken before the handler ran (or instead of it), ``"after"`` when the
    handler had already run."""
    limit: LimitReading | None = None
    """What a counting limit read when it took this decision (its scope, key and count), if a
    limit took it."""

    def as_dict(self) -> dict[str, Any]:
        """The decision as plain JSON data (how stores and the audit keep it).

        ``limit`` is present only when a limit's reading is kept.
        """
        data: dict[str, Any] = {
            "policy": self.policy,
            "action": self.action,
            "reason": self.reason,
            "when": self.when,
        }
        if self.limit is not None:
            data["limit"] = self.limit.as_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """The decision `as_dict` wrote."""
        limit = data.get("limit")
        return cls(
            policy=data["policy"],
            action=data["action"],
            reason=data["reason"],
            when=data.get("when", "before"),
            limit=None if limit is None else LimitReading.from_dict(limit),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDecision:
    """One decision about a tool for the rest of a turn (hiding it, withdrawing it)."""

    tool: str
    """The tool's name."""
    policy: str
    """Who decided (a middleware's namespace or name)."""
    action: ToolDecisionAction
    """``"hidden"`` or ``"withdrawn"``."""
    reason: str
    """Why, in the policy's words; the model reads it when it calls the tool again."""
    call_id: str | None = None
    """The call whose outcome led to the decision, if one did (the call that used up a limit)."""

    def as_dict(self) -> dict[str, str | None]:
        """The decision as plain JSON data."""
        return {
            "tool": self.tool,
            "policy": self.policy,
            "action": self.action,
            "reason": self.reason,
            "call_id": self.call_id,
        }


def verdict(decisions: Sequence[Decision], ran: bool) -> Verdict:
    """The one word for a call with these ``decisions`` whose handler ``ran`` or not.

    The last decision that settles the outcome (`SETTLING`) is the verdict; otherwise an
    approval, else a warning; otherwise ``"allowed"`` when the handler ran, ``"not_run"`` when
    it did not.
    """
    approved = warned = False
    for decision in reversed(decisions):
        action = decision.action
        if action in SETTLING:
            return action  # type: ignore[return-value]  # SETTLING are verdicts too
        if action == "approved":
            approved = True
        elif action == "warned":
            warned = True
    if approved:
        return "approved"
    if warned:
        return "warned"
    return "allowed" if ran else "not_run"


for _public in (Decision, LimitReading, ToolDecision, verdict):
    _public.__module__ = "pipeline.calls"
