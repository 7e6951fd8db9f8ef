"""Replay: what would this policy have done on a real conversation?

A recorded support-agent conversation (Anthropic messages, the sample in ``tests/data``) is
replayed offline through two candidate stacks with `middleware.transcripts.replay`. Every
recorded tool call gets its replayed record's verdict (allowed, denied, rejected, invalid..., or
not reached), the word ``loopware run``, the audit log and tracing use, with the decisions behind
it and the tools its outcome hid, so two policies can be compared on the same real traffic before
either is deployed. A transcript can also be given as data: here an OpenAI chat-completions list
built in code, with a tool name loopware cannot register (``Final Answer``), replayed under a
safe alias.

The ``loopware replay`` command is a front end over the same API. Run it with
``python examples/07_replay.py``.
"""

from __future__ import annotations

from pathlib import Path

from middleware import ApprovalGate, RepetitionDetector, ToolCallLimit, ToolPolicy
from middleware.transcripts import ReplayReport, read_transcript, replay

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "support_agent_denied.json"


def show(title: str, report: ReplayReport) -> None:
    """Print one line per recorded call, then the verdict counts."""
    print(f"\n{title}")
    for turn in report.turns:
        for placed in turn.decisions:  # decisions about tools no call led to, where taken
            d = placed.decision
            where = f"turn {turn.turn.index}, {placed.where()}"
            print(f"  {where}: {d.tool} {d.action} by {d.policy}: {d.reason}")
        for outcome in turn.calls:
            ran = "" if outcome.ran is None else (" (ran)" if outcome.ran else " (never ran)")
            print(f"  #{outcome.call.index} {outcome.call.tool:<14} {outcome.verdict}{ran}")
            for decision in outcome.decisions:
                print(f"      {decision.action} by {decision.policy}: {decision.reason}")
            for hid in outcome.tool_decisions:
                print(f"      then {hid.tool} {hid.action} by {hid.policy}: {hid.reason}")
    print(f"  verdicts: {report.counts()}; refused anything: {report.refused}")


def main() -> None:
    """Replay the sample through a lenient and a strict stack, then a transcript given as data."""
    transcript = read_transcript(SAMPLE)
    print(
        f"{transcript.source}: {transcript.format}, {len(transcript.turns)} turns, "
        f"{len(transcript.calls)} calls, {len(transcript.issues)} issues"
    )
    lenient = replay(transcript, [ToolPolicy(deny=["shell*"])])
    show("lenient: no shell tools", lenient)
    strict = replay(
        transcript,
        [
            ToolPolicy(deny=["shell*"]),
            ApprovalGate(["update_address"], approver=lambda gate: False),
            RepetitionDetector(threshold=2),
            ToolCallLimit({"issue_refund": 1}),
        ],
    )
    show("strict: + address changes need a human (who says no), one refund per turn", strict)

    messages = [
        {"role": "user", "content": "What is 6 x 7?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "calculator", "arguments": {"expr": "6*7"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c2", "function": {"name": "Final Answer", "arguments": '{"a": 42}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "42"},
        {"role": "assistant", "content": "42"},
    ]
    report = replay(messages, [ToolPolicy(deny=["Final_*"])])
    show("data: a name loopware cannot register, denied through its alias", report)
    final = report.calls[1]
    print(f"  {final.call.tool!r} was replayed as {final.alias!r}")


if __name__ == "__main__":
    main()
