"""One recorded turn being replayed: its scripted model steps and the records it left.

What the stack decided is read from the records the replay stored (`ToolCallStored`: the
verdict, ``ran`` and the decisions of each call) and from `ToolDecided` (tools hidden or
withdrawn), never rebuilt from logs or the stash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from pipeline.calls import Decision, ToolCall, ToolDecision
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall

from ._names import argument_difference
from ._outcome import CallOutcome, TurnDecision
from ._types import RecordedCall, RecordedTurn

__all__ = ["TurnScript"]

_OSCILLATION: Final = re.compile(
    r"two calls of (?P<tool>.+?) with different arguments \((?P<a>[0-9a-f]{8}) and "
    r"(?P<b>[0-9a-f]{8})\)"
)


class TurnScript:
    """The recorded turn's model (one step per `complete`) and the records it left.

    Keeps nothing per request: for each step it notes only whether each proposed call's tool was
    offered, so a long turn costs memory in proportion to its calls, not to its calls squared.
    Every lookup (a call by replay id, arguments by checksum prefix) is a dict access.
    """

    __slots__ = (
        "aliases",
        "by_id",
        "calls",
        "iteration",
        "last_reached",
        "loose",
        "offered",
        "prefixes",
        "step",
        "stored",
        "tools",
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
        self.prefixes: dict[str, str] = {}
        """First 8 characters of a checksum -> the arguments of a call that had it."""
        self.tools: dict[int, list[ToolDecision]] = {}
        """Tool decisions by the index of the recorded call whose outcome led to them."""
        self.loose: list[TurnDecision] = []
        self.last_reached: int | None = None

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

    def recorded(self, call_id: str) -> RecordedCall | None:
        """The recorded call replayed under ``call_id``, if it is one."""
        return self.by_id.get(call_id)

    def on_stored(self, call: ToolCall) -> None:
        """Keep a stored call's record under its recorded call (a re-stored one replaces it)."""
        recorded = self.by_id.get(call.id)
        if recorded is None:
            return  # stored by middleware, not by the recorded script
        index = recorded.index
        self.stored[index] = call
        for checksum in (call.checksum, call.validated_checksum):
            if checksum is not None:
                self.prefixes.setdefault(checksum[:8], recorded.arguments)
        if self.last_reached is None or index > self.last_reached:
            self.last_reached = index

    def on_tool_decided(self, decision: ToolDecision) -> None:
        """Keep a tool decision with the recorded call that led to it, or where it was taken."""
        call_id = decision.call_id
        recorded = self.by_id.get(call_id) if call_id is not None else None
        if recorded is not None:
            self.tools.setdefault(recorded.index, []).append(decision)
        else:
            self.loose.append(TurnDecision(decision, self.last_reached, self.iteration))

    def _readable(self, decision: Decision) -> Decision:
        """Name the arguments that distinguish two oscillating calls of one tool."""
        match = _OSCILLATION.search(decision.reason)
        if match is None:
            return decision
        first, second = self.prefixes.get(match["a"]), self.prefixes.get(match["b"])
        if first is None or second is None:
            return decision
        a, b = argument_difference(first, second)
        reason = decision.reason.replace(match[0], f"two calls of {match['tool']}: {a} and {b}")
        return replace(decision, reason=reason)

    def outcomes(self) -> tuple[CallOutcome, ...]:
        """One outcome per recorded call of the turn, in order."""
        result: list[CallOutcome] = []
        for call in self.calls:
            alias = self.aliases.get(call.tool)
            stored = self.stored.get(call.index)
            if stored is None:
                result.append(CallOutcome(call, None, None, alias=alias))
                continue
            result.append(
                CallOutcome(
                    call,
                    stored,
                    self.offered.get(call.index),
                    tuple(self._readable(d) for d in stored.decisions),
                    tuple(self.tools.get(call.index, ())),
                    alias,
                )
            )
        return tuple(result)
