"""Rendering a `ReplayReport` for a terminal, and transcript issues as compiler-style lines."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from ._replay_outcome import REFUSALS

if TYPE_CHECKING:
    from ._replay_outcome import CallOutcome, ReplayReport, TurnOutcome
    from ._replay_types import TranscriptIssue
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
    if outcome.stored is not None and outcome.ran is False and outcome.verdict in REFUSALS:
        notes.append("never ran: refused before its handler")
    if outcome.offered is False:
        notes.append("the tool was not offered to the model on this step")
    if outcome.error is not None:
        notes.append(f"replayed call failed: {short(outcome.error, _ARGS_WIDTH)}")
    lines.extend(f"{_INDENT}{style.paint(note, 'dim')}" for note in notes)
    lines.extend(f"{_INDENT}{d.describe()}" for d in outcome.decisions)
    return lines


def _turn_lines(outcome: TurnOutcome, style: Style) -> list[str]:
    turn = outcome.turn
    source = f"messages[{turn.message_index}]" if turn.message_index is not None else "continued"
    said = f'"{short(turn.input, _TEXT_WIDTH)}"' if turn.input else "(no user message)"
    lines = ["", style.paint(f"turn {turn.index}", "bold", "cyan") + f"  {source}  user: {said}"]
    for decision in outcome.decisions:
        tool = f"{decision.tool} " if decision.tool else ""
        lines.append(f"  before the model: {tool}{decision.describe()}")
    for call in outcome.calls:
        lines.extend(_call_lines(call, style))
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
        f"  middleware: {', '.join(report.middleware) or '(none)'}",
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
    if transcript.issues:
        lines.append(
            style.paint(f"  {len(transcript.issues)} problem(s) in the transcript", "red")
            + " (listed on stderr); the readable part was replayed"
        )
    return "\n".join(lines)
