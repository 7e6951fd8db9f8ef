"""How the command line labels a call and a decision, the same way in every command.

A call's label is its record's verdict (`ToolCall.verdict`, one word: ``allowed``, ``denied``,
``invalid``...) and the decision it comes from (`ToolCall.deciding`). ``loopware run`` and
``loopware demo`` (the live printer, ``loopware_cli/_live.py``) and ``loopware replay``
(``loopware_cli/_replay_render.py``) print calls, decisions and tool decisions with these
functions only, so one call can never read "allowed" in one and "denied" in another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pipeline.calls import Decision, ToolCall, ToolDecision

__all__ = ["call_label", "describe", "describe_tool"]


def _why(policy: str, reason: str, labels: Mapping[str, str]) -> str:
    label = labels.get(policy)
    kind = f"{label}: " if label else ""
    return f"{kind}{reason} [{policy}]"


def _plain(word: str) -> str:
    return word


def describe(
    decision: Decision, labels: Mapping[str, str], paint: Callable[[str], str] = _plain
) -> str:
    """One decision about a call: ``denied - tool policy: <reason> [loopware.policy]``.

    ``labels`` maps a policy's name to what its decisions mean
    (`middleware.transcripts.policy_labels`); ``paint`` styles the action word (a terminal
    colours it).
    """
    return f"{paint(decision.action)} - {_why(decision.policy, decision.reason, labels)}"


def describe_tool(
    decision: ToolDecision, labels: Mapping[str, str], paint: Callable[[str], str] = _plain
) -> str:
    """One decision about a tool: ``search hidden - limit reached: <reason> [loopware.limit]``."""
    why = _why(decision.policy, decision.reason, labels)
    return f"{decision.tool} {paint(decision.action)} - {why}"


def call_label(
    call: ToolCall, labels: Mapping[str, str], paint: Callable[[str], str] = _plain
) -> str:
    """A call's label: its record's verdict and, when a decision settled it, that decision.

    ``denied - tool policy: matches deny pattern 'shell*' [loopware.policy]``, or ``allowed``
    for a call that ran with no decision (the word is ``call.verdict`` either way).
    """
    deciding = call.deciding
    return paint(call.verdict) if deciding is None else describe(deciding, labels, paint)
