"""Rendering a `ReplayReport` for a terminal, and transcript issues as compiler-style lines."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from ._replay_policy import POLICY_SUGGESTION

if TYPE_CHECKING:
    from middleware.transcripts import (
        CallOutcome,
        Decision,
        ReplayReport,
        TranscriptIssue,
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


def short_args(arguments: str, width: int = _ARGS_WIDTH) -> str:
    """Compact JSON arguments (or the raw text when it is not JSON), shortened."""
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False, separators=(", ", ": "))
    except (ValueError, RecursionError):
        text = arguments
    return short(text, width)


def format_issue(issue: TranscriptIssue, source: str) -> str:
    """``source:line:column: CODE: messages[i]: message`` (the known parts only)."""
    where = source
    if issue.line is not None:
        where += f":{issue.line}"
        if issue.column is not None:
            where += f":{issue.column}"
    index = f"messages[{issue.message_index}]: " if issue.message_index is not None else ""
    return f"{where}: {issue.code}: {index}{issue.message}"


def _call_lines(outcome: CallOutcome, style: Style) -> list[str]:
    call = outcome.call
    verdict = style.verdict(f"{outcome.verdict:<11}", key=outcome.verdict)
    where = style.paint(f"messages[{call.message_index}]", "dim")
    lines = [
        f"  #{call.index:<3} {verdict} {style.paint(call.tool, 'bold')} "
        f"{short_args(call.arguments, max(20, 62 - len(call.tool)))}  {where}"
    ]
    notes: list[str] = []
    if outcome.alias is not None:
        notes.append(f"replayed as {outcome.alias} ({call.tool!r} cannot be a tool name)")
    if outcome.stored is not None and outcome.ran is False and outcome.refused:
        notes.append("never ran: refused before its handler")
    if outcome.offered is False:
        notes.append("the tool was not offered to the model on this step")
    if outcome.error is not None and outcome.verdict == "failed":
        notes.append(f"replayed call failed: {short(outcome.error, _ARGS_WIDTH)}")
    lines.extend(f"{_INDENT}{style.paint(note, 'dim')}" for note in notes)
    lines.extend(f"{_INDENT}{d.describe()}" for d in outcome.decisions)
    return lines


def _decision_line(decision: Decision) -> str:
    tool = f"{decision.tool} " if decision.tool else ""
    return f"  {decision.where()}: {tool}{decision.describe()}"


def _turn_lines(outcome: TurnOutcome, style: Style) -> list[str]:
    turn = outcome.turn
    source = f"messages[{turn.message_index}]" if turn.message_index is not None else "continued"
    said = f'"{short(turn.input, _TEXT_WIDTH)}"' if turn.input else "(no user message)"
    lines = ["", style.paint(f"turn {turn.index}", "bold", "cyan") + f"  {source}  user: {said}"]
    after: dict[int | None, list[Decision]] = {}
    for decision in outcome.decisions:
        after.setdefault(decision.after_call, []).append(decision)
    lines.extend(_decision_line(d) for d in after.pop(None, ()))
    for call in outcome.calls:
        lines.extend(_call_lines(call, style))
        lines.extend(_decision_line(d) for d in after.pop(call.call.index, ()))
    for rest in after.values():  # after a call the turn does not list (never, but never lost)
        lines.extend(_decision_line(d) for d in rest)
    if turn.answer is None and outcome.status == "completed":
        lines.append(f"  {style.paint('(the recording ends before a final answer)', 'dim')}")
    status = style.verdict(outcome.status, key="failed" if outcome.status != "completed" else "ok")
    end = f"  turn {turn.index} {status} after {outcome.iterations} iteration(s)"
    if outcome.error_message:
        end += f": {outcome.error_message}"
    lines.append(end)
    return lines


def render_report(report: ReplayReport, style: Style) -> str:
    """The human-readable replay report."""
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
        lines.extend(_turn_lines(turn, style))
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
