"""One recorded turn being replayed: its scripted model steps and what the events told."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, Final

from pipeline import ModelRequest, ModelResponse, ProposedToolCall, ToolCall

from ._names import argument_difference
from ._outcome import FAILED, NOT_REACHED, SEVERITY, CallOutcome, Decision
from ._types import RecordedCall, RecordedTurn

__all__ = ["TurnScript", "stash_decisions"]

_REFUSING: Final = frozenset({"hidden", "rejected", "denied"})
_OSCILLATION: Final = re.compile(
    r"two calls of (?P<tool>.+?) with different arguments \((?P<a>[0-9a-f]{8}) and "
    r"(?P<b>[0-9a-f]{8})\)"
)


class TurnScript:
    """The recorded turn's model (one step per `complete`) and the decisions heard about it.

    Keeps nothing per request: for each step it notes only whether each proposed call's tool was
    offered, so a long turn costs memory in proportion to its calls, not to its calls squared.
    Every lookup (a call by replay id, a stored call by checksum) is a dict access.
    """

    __slots__ = (
        "aliases",
        "by_checksum",
        "by_id",
        "calls",
        "decisions",
        "iteration",
        "last_reached",
        "loose",
        "offered",
        "prefixes",
        "ran",
        "reached_iteration",
        "seen",
        "step",
        "stored",
        "turn",
        "turn_id",
    )

    def __init__(self, turn: RecordedTurn, aliases: Mapping[str, str]) -> None:
        """Prepare the replay of ``turn``; ``aliases`` maps recorded names to replayed ones."""
        self.turn = turn
        self.aliases = aliases
        self.calls = turn.calls
        self.by_id = {c.replay_id: c for c in self.calls}
        self.step = 0
        self.turn_id: str | None = None
        self.iteration: int | None = None
        self.offered: dict[int, bool] = {}
        self.stored: dict[int, ToolCall] = {}
        self.reached_iteration: dict[int, int | None] = {}
        self.by_checksum: dict[str, int] = {}
        self.prefixes: dict[str, str] = {}
        """First 8 characters of a checksum -> the arguments of a call that had it."""
        self.ran: set[int] = set()
        self.decisions: dict[int, list[Decision]] = {}
        self.loose: list[Decision] = []
        self.last_reached: int | None = None
        self.seen: Counter[tuple[object, ...]] = Counter()

    def __repr__(self) -> str:
        return f"TurnScript(turn={self.turn.index}, step={self.step}, stored={len(self.stored)})"

    def respond(self, request: ModelRequest) -> ModelResponse:
        """The next recorded step (then the recorded answer), noting which tools were offered."""
        k = self.step
        self.step = k + 1
        steps = self.turn.steps
        if k >= len(steps):
            return ModelResponse(text=self.turn.answer)
        step = steps[k]
        names = {t["name"] for t in request.tools}
        aliases = self.aliases
        proposed = []
        for c in step.calls:
            name = aliases.get(c.tool, c.tool)
            self.offered[c.index] = name in names
            proposed.append(ProposedToolCall(c.replay_id, name, c.arguments))
        return ModelResponse(text=step.text, tool_calls=tuple(proposed))

    def running(self, call_id: str) -> RecordedCall | None:
        """The recorded call a handler is about to run for, marked as run."""
        call = self.by_id.get(call_id)
        if call is not None:
            self.ran.add(call.index)
        return call

    def on_stored(self, call: ToolCall) -> None:
        """Map a stored call back to its recorded call (a re-stored one is refreshed)."""
        recorded = self.by_id.get(call.id)
        if recorded is None:
            return  # stored by middleware, not by the recorded script
        index = recorded.index
        self.stored[index] = call
        self.reached_iteration.setdefault(index, self.iteration)
        self.by_checksum[call.checksum] = index
        self.prefixes[call.checksum[:8]] = recorded.arguments
        if self.last_reached is None or index > self.last_reached:
            self.last_reached = index

    def on_decision(self, payload: Mapping[str, Any]) -> None:
        """A ``policy.decision`` log: attach it to its call, or keep it where it happened."""
        call_id = _opt_str(payload.get("call_id"))
        checksum = _opt_str(payload.get("checksum"))
        recorded = self.by_id.get(call_id) if call_id is not None else None
        if recorded is not None and checksum is not None:
            self.prefixes.setdefault(checksum[:8], recorded.arguments)
        decision = Decision(
            policy=str(payload.get("policy") or "?"),
            tool=_opt_str(payload.get("tool")),
            action=str(payload.get("action") or "?"),
            reason=self._readable(str(payload.get("reason") or "")),
            iteration=_opt_int(payload.get("iteration")),
        )
        self.seen[decision.key()] += 1
        if recorded is not None:
            self.decisions.setdefault(recorded.index, []).append(decision)
        else:
            self._attach(decision, checksum)

    def _readable(self, reason: str) -> str:
        """Name the arguments that distinguish two oscillating calls of one tool."""
        match = _OSCILLATION.search(reason)
        if match is None:
            return reason
        first, second = self.prefixes.get(match["a"]), self.prefixes.get(match["b"])
        if first is None or second is None:
            return reason
        a, b = argument_difference(first, second)
        return reason.replace(match[0], f"two calls of {match['tool']}: {a} and {b}")

    def _attach(self, decision: Decision, checksum: str | None) -> None:
        index = self.by_checksum.get(checksum) if checksum is not None else None
        if index is not None and (
            decision.iteration is None or self.reached_iteration.get(index) == decision.iteration
        ):
            self.decisions.setdefault(index, []).append(decision)
            return
        at = decision.iteration if decision.iteration is not None else self.iteration
        self.loose.append(
            Decision(
                decision.policy,
                decision.tool,
                decision.action,
                decision.reason,
                decision.iteration,
                after_call=self.last_reached,
                at_iteration=at,
            )
        )

    def add_stash_decisions(self, stash: Mapping[str, Any]) -> None:
        """Add decisions recorded only in the stash (middleware that logs none)."""
        for namespace, entry in stash_decisions(stash, ""):
            decision = Decision(
                policy=namespace,
                tool=_opt_str(entry.get("tool")),
                action=str(entry.get("action") or "?"),
                reason=str(entry.get("reason") or ""),
                iteration=_opt_int(entry.get("iteration")),
            )
            key = decision.key()
            if self.seen[key] > 0:  # already reported by its policy.decision log
                self.seen[key] -= 1
            else:
                self._attach(decision, _opt_str(entry.get("checksum")))

    def outcomes(self, labels: Mapping[str, str]) -> tuple[CallOutcome, ...]:
        """One outcome per recorded call of the turn, in order."""
        result: list[CallOutcome] = []
        for call in self.calls:
            alias = self.aliases.get(call.tool)
            stored = self.stored.get(call.index)
            if stored is None:
                result.append(CallOutcome(call, None, None, (), NOT_REACHED, None, alias))
                continue
            decisions = tuple(d.labelled(labels) for d in self.decisions.get(call.index, ()))
            strongest = max((d.action for d in decisions), key=_severity, default="allowed")
            verdict = FAILED if stored.is_error and strongest not in _REFUSING else strongest
            result.append(
                CallOutcome(
                    call,
                    stored,
                    self.offered.get(call.index),
                    decisions,
                    verdict,
                    call.index in self.ran,
                    alias,
                )
            )
        return tuple(result)


def _severity(action: str) -> int:
    return SEVERITY.get(action, 0)


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stash_decisions(node: object, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ``<namespace>.decisions`` entry of a stash, with its namespace."""
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        here = f"{path}.{key}" if path else str(key)
        if key == "decisions" and isinstance(value, list) and path:
            for entry in value:
                if isinstance(entry, Mapping) and "action" in entry:
                    yield path, entry
        else:
            yield from stash_decisions(value, here)
