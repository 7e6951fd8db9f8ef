"""Rendering a `ReplayReport` for a terminal, and transcript issues as compiler-style lines.

Each call reads its record's verdict, and every decision and tool decision is labelled by
``loopware_cli/_labels.py``, as ``loopware run`` labels them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ._labels import describe, describe_tool
from ._replay_policy import POLICY_SUGGESTION

if TYPE_CHECKING:
    from middleware.transcripts import (
        CallOutcome,
        ReplayReport,
        TranscriptIssue,
        TurnDecision,
        TurnOutcome,
    )

    from ._style import Style

__all__ = ["format_issue", "render_report", "short"]

_ARGS_WIDTH: Final = 72
_TEXT_WIDTH: Final = 60
_INDENT: Final = " " * 19


def short(text: str, width: int) -> str:
    """One line of at most ``width`` characters (``...`` marks a cut)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def short_args(arguments: str, width: int | None = _ARGS_WIDTH) -> str:
    """Compact JSON arguments (or the raw text when it is not JSON), cut at ``width``.

    ``width=None`` keeps them whole (on one line).
    """
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False, separators=(", ", ": "))
    except (ValueError, RecursionError):
        text = arguments
    return short(text, width if width is not None else len(text) + 1)


def format_issue(issue: TranscriptIssue, source: str) -> str:
    """``source:line:column: CODE: messages[i]: message`` (the known parts only)."""
    where = source
    if issue.line is not None:
        where += f":{issue.line}"
        if issue.column is not None:
            where += f":{issue.column}"
    index = f"messages[{issue.message_index}]: " if issue.message_index is not None else ""
    return f"{where}: {issue.code}: {index}{issue.message}"


def _call_lines(
    outcome: CallOutcome, style: Style, labels: Mapping[str, str], width: int | None
) -> list[str]:
    call = outcome.call
    verdict = style.verdict(f"{outcome.verdict:<11}", key=outcome.verdict)
    place = f"messages[{call.message_index}]"
    head = f"  #{call.index:<3} {outcome.verdict:<11} {call.tool} "
    room = None if width is None else max(20, width - len(head) - 2 - len(place))
    lines = [
        f"  #{call.index:<3} {verdict} {style.paint(call.tool, 'bold')} "
        f"{short_args(call.arguments, room)}  {style.paint(place, 'dim')}"
    ]
    notes: list[str] = []
    if outcome.alias is not None:
        notes.append(f"replayed as {outcome.alias} ({call.tool!r} cannot be a tool name)")
    if outcome.ran is False:
        notes.append("never ran: refused before its handler")
    if outcome.offered is False:
        notes.append("the tool was not offered to the model on this step")
    if outcome.error is not None and outcome.ran:
        notes.append(f"replayed call failed: {short(outcome.error, _ARGS_WIDTH)}")
    lines.extend(f"{_INDENT}{style.paint(note, 'dim')}" for note in notes)
    lines.extend(f"{_INDENT}{describe(d, labels, style.verdict)}" for d in outcome.decisions)
    lines.extend(
        f"{_INDENT}then: tool {describe_tool(d, labels, style.verdict)}"
        for d in outcome.tool_decisions
    )
    return lines


def _decision_line(decision: TurnDecision, style: Style, labels: Mapping[str, str]) -> str:
    return f"  {decision.where()}: tool {describe_tool(decision.decision, labels, style.verdict)}"


def _end_line(outcome: TurnOutcome, style: Style) -> str:
    status = style.verdict(outcome.status, key="failed" if outcome.status != "completed" else "ok")
    end = f"  turn {outcome.turn.index} {status} after {outcome.iterations} iteration(s)"
    if outcome.error_message:
        end += f": {outcome.error_message}"
    return end


def _turn_lines(
    outcome: TurnOutcome, style: Style, labels: Mapping[str, str], width: int | None
) -> list[str]:
    """The turn's calls in order, each tool decision after the call it followed, then its end.

    A turn that ended early is shown ending where it did: after the last call it reached,
    before the calls it never got to.
    """
    turn = outcome.turn
    source = f"messages[{turn.message_index}]" if turn.message_index is not None else "continued"
    said = f'"{short(turn.input, _TEXT_WIDTH)}"' if turn.input else "(no user message)"
    lines = ["", style.paint(f"turn {turn.index}", "bold", "cyan") + f"  {source}  user: {said}"]
    after: dict[int | None, list[TurnDecision]] = {}
    for decision in outcome.decisions:
        after.setdefault(decision.after_call, []).append(decision)
    lines.extend(_decision_line(d, style, labels) for d in after.pop(None, ()))
    ended = outcome.status != "completed"
    if ended and outcome.after_call is None:
        lines.append(_end_line(outcome, style))
    for call in outcome.calls:
        lines.extend(_call_lines(call, style, labels, width))
        lines.extend(_decision_line(d, style, labels) for d in after.pop(call.call.index, ()))
        if ended and call.call.index == outcome.after_call:
            lines.append(_end_line(outcome, style))
    for rest in after.values():  # after a call the turn does not list (never, but never lost)
        lines.extend(_decision_line(d, style, labels) for d in rest)
    if turn.answer is None and not ended:
        lines.append(f"  {style.paint('(the recording ends before a final answer)', 'dim')}")
    if not ended:
        lines.append(_end_line(outcome, style))
    return lines


def render_report(report: ReplayReport, style: Style, width: int | None = None) -> str:
    """The human-readable replay report; each call's arguments cut to fit ``width`` columns.

    ``width=None`` shows every call's arguments whole.
    """
    transcript = report.transcript
    calls = report.calls
    lines = [
        style.paint(f"loopware replay: {transcript.source}", "bold"),
        f"  {transcript.format} transcript, {transcript.message_count} messages, "
        f"{len(transcript.turns)} turn(s), {len(calls)} tool call(s)",
        f"  policy: {', '.join(report.middleware)}"
        if report.middleware
        else f"  policy: none: no policy is used, so every call is allowed ({POLICY_SUGGESTION})",
    ]
    for stage, names in report.pipelines.items():
        if names:
            lines.append(f"    {stage}: {' -> '.join(names)}")
    for turn in report.turns:
        lines.extend(_turn_lines(turn, style, report.labels, width))
    counts = ", ".join(f"{n} {style.verdict(v)}" for v, n in report.counts().items())
    lines.append("")
    lines.append(
        style.paint("summary", "bold")
        + f": {len(calls)} tool call(s)"
        + (f": {counts}" if counts else "")
    )
    errors, model = transcript.errors, transcript.model_errors
    if errors:
        lines.append(
            style.paint(f"  {len(errors)} problem(s) in the transcript", "red")
            + " (listed on stderr); the readable part was replayed"
        )
    if model:
        lines.append(
            style.paint(f"  {len(model)} model error(s) recorded", "yellow")
            + " (listed on stderr): those calls were replayed as the model sent them"
        )
    return "\n".join(lines)
