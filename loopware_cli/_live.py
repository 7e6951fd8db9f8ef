"""Printing a turn as it runs: each iteration's offered tools, calls, results and decisions.

Shared by ``loopware demo`` and ``loopware run``: subscribe `LiveOutput.on_log`,
`LiveOutput.on_stored` and `LiveOutput.on_iteration_end` to a runner.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from pipeline import IterationEnd, Log, SpooledArtifact, ToolCall, ToolCallStored

from ._replay_render import short, short_args
from ._style import Style

__all__ = ["LiveOutput"]


@dataclass(slots=True)
class _Pending:
    """A call stored in the current iteration, waiting for the stack's decisions."""

    call: ToolCall
    decisions: list[str] = field(default_factory=list)


class LiveOutput:
    """Prints each iteration when it ends: offered tools, calls, results and decisions."""

    __slots__ = ("_labels", "_offered", "_out", "_pending", "_style")

    def __init__(
        self,
        out: TextIO,
        style: Style,
        offered: Callable[[int], str],
        labels: Mapping[str, str],
    ) -> None:
        """Print to ``out``; ``offered(iteration)`` names the tools offered on an iteration."""
        self._out = out
        self._style = style
        self._offered = offered
        self._labels = labels
        self._pending: list[_Pending] = []

    def __repr__(self) -> str:
        """Show how many calls wait for their iteration to end."""
        return f"LiveOutput(pending={len(self._pending)})"

    def _print(self, text: str = "") -> None:
        print(text, file=self._out)

    def _decision(self, payload: Mapping[str, Any]) -> str:
        action = str(payload.get("action"))
        label = self._labels.get(str(payload.get("policy")))
        kind = f"{label}: " if label else ""
        return f"{self._style.verdict(action)} - {kind}{payload.get('reason')}"

    def on_log(self, event: Log) -> None:
        """Attach a ``policy.decision`` to its call (or print a turn-stage one at once)."""
        if event.kind != "policy.decision":
            return
        payload = event.payload
        if payload.get("iteration") is None:  # a turn-stage decision: print it at once
            self._print(
                f"  {self._style.paint('policy', 'magenta')} {payload.get('tool')} removed from "
                f"the turn: {self._decision(payload)}"
            )
            return
        call_id = payload.get("call_id")
        target = next((p for p in self._pending if p.call.id == call_id), None)
        if target is None:
            target = next((p for p in self._pending if p.call.tool == payload.get("tool")), None)
        if target is not None:
            target.decisions.append(self._decision(payload))

    def on_stored(self, event: ToolCallStored) -> None:
        """Remember a stored call until its iteration ends."""
        self._pending.append(_Pending(event.call))

    def on_iteration_end(self, event: IterationEnd) -> None:
        """Print the iteration: the tools offered, each call, its result and decisions."""
        style = self._style
        offered = self._offered(event.iteration) or "(none)"
        self._print(
            style.paint(f"iteration {event.iteration}", "bold", "cyan")
            + style.paint(f"  offered: {offered}", "dim")
        )
        for pending in self._pending:
            call = pending.call
            self._print(f"  {style.paint(call.tool, 'bold')} {short_args(json.dumps(call.args))}")
            results = call.results
            text = results.as_string() if isinstance(results, SpooledArtifact) else str(results)
            if call.is_error:
                text = text.removeprefix("Error: ")
                self._print(f"    {style.verdict('error', key='failed')}: {short(text, 88)}")
            else:
                self._print(f"    result: {short(text, 88)}")
            for decision in pending.decisions or [style.verdict("allowed")]:
                self._print(f"    decision: {decision}")
        self._pending.clear()


