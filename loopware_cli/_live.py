"""Printing a turn as it runs: each iteration's offered tools, calls, results and verdicts.

Shared by ``loopware demo`` and ``loopware run``: `LiveOutput.observe` a runner. Everything
printed about a call comes from its stored record (`ToolCallStored`): the verdict and the
decision it comes from, labelled by ``loopware_cli/_labels.py`` as ``loopware replay`` labels
them; decisions about tools (a tool hidden or withdrawn) come from `ToolDecided`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TextIO

from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall, ToolDecision
from pipeline.events import IterationEnd, IterationStart, ToolCallStored, ToolDecided
from pipeline.stages import EventSource

from ._labels import call_label, describe_tool
from ._replay_render import short, short_args
from ._style import Style

__all__ = ["LiveOutput"]


class LiveOutput:
    """Prints each iteration when it ends: offered tools, calls, results and verdicts.

    Calls are held until their iteration ends (a call is stored before the ``dispatch_output``
    middleware that may hide its tool has run); a tool decision taken outside an iteration (a
    policy withdrawing a tool at the turn's start) is printed at once.
    """

    __slots__ = ("_calls", "_iteration", "_labels", "_offered", "_out", "_style", "_tools")

    def __init__(
        self,
        out: TextIO,
        style: Style,
        offered: Callable[[int], str],
        labels: Mapping[str, str],
    ) -> None:
        """Print to ``out``; ``offered(iteration)`` names the tools offered on an iteration.

        ``labels`` maps a policy's name to what its decisions mean
        (`middleware.transcripts.policy_labels`).
        """
        self._out = out
        self._style = style
        self._offered = offered
        self._labels = labels
        self._iteration: int | None = None
        self._calls: dict[str, ToolCall] = {}
        self._tools: list[ToolDecision] = []

    def __repr__(self) -> str:
        """Show how many calls wait for their iteration to end."""
        return f"LiveOutput(iteration={self._iteration}, pending={len(self._calls)})"

    def observe(self, events: EventSource) -> None:
        """Subscribe to the events the printer reads (a runner's ``on``)."""
        events.on(IterationStart, self.on_iteration_start)
        events.on(ToolCallStored, self.on_stored)
        events.on(ToolDecided, self.on_tool_decided)
        events.on(IterationEnd, self.on_iteration_end)

    def _print(self, text: str = "") -> None:
        print(text, file=self._out)

    def on_iteration_start(self, event: IterationStart) -> None:
        """Note that an iteration runs: tool decisions wait for its end from now on."""
        self._iteration = event.iteration

    def on_stored(self, event: ToolCallStored) -> None:
        """Keep a stored call until its iteration ends (a call stored again replaces it)."""
        self._calls[event.call.id] = event.call

    def on_tool_decided(self, event: ToolDecided) -> None:
        """Keep a tool decision for its iteration's end, or print it at once outside one."""
        if self._iteration is None:
            self._print(f"  {self._tool_line(event.decision)}")
        else:
            self._tools.append(event.decision)

    def _tool_line(self, decision: ToolDecision) -> str:
        style = self._style
        return f"{style.paint('tool', 'magenta')} " + describe_tool(
            decision, self._labels, style.verdict
        )

    def on_iteration_end(self, event: IterationEnd) -> None:
        """Print the iteration: the tools offered, each call, its result, verdict and effects."""
        style = self._style
        offered = self._offered(event.iteration) or "(none)"
        self._print(
            style.paint(f"iteration {event.iteration}", "bold", "cyan")
            + style.paint(f"  offered: {offered}", "dim")
        )
        tools = self._tools
        for call in self._calls.values():
            self._print(f"  {style.paint(call.tool, 'bold')} {short_args(json.dumps(call.args))}")
            results = call.results
            text = results.as_string() if isinstance(results, SpooledArtifact) else str(results)
            if call.is_error:
                text = text.removeprefix("Error: ")
                self._print(f"    {style.verdict('error', key='failed')}: {short(text, 88)}")
            else:
                self._print(f"    result: {short(text, 88)}")
            self._print(f"    decision: {call_label(call, self._labels, style.verdict)}")
            for decision in tools:
                if decision.call_id == call.id:
                    self._print(f"    then: {self._tool_line(decision)}")
        for decision in tools:
            if decision.call_id is None or decision.call_id not in self._calls:
                self._print(f"  {self._tool_line(decision)}")
        self._calls.clear()
        self._tools.clear()
        self._iteration = None
