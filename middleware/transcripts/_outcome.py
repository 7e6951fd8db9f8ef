"""What a replay found: each recorded call's stored record and verdict, per turn, as values.

A replayed call's verdict is its record's (`ToolCall.verdict`: ``allowed``, ``denied``,
``rejected``, ``invalid``...), the word ``loopware run``, the audit log and tracing show for the
same call; a recorded call the replayed turn never got to has no record and reads
``not reached``. Decisions about tools (a tool hidden or withdrawn for the rest of the turn)
are kept with the call whose outcome led to them, or with the turn, where they were taken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from pipeline.calls import Decision, ToolDecision, Verdict

if TYPE_CHECKING:
    from pipeline.calls import ToolCall

    from ._types import RecordedCall, RecordedTurn, Transcript

__all__ = [
    "NOT_REACHED",
    "ORDER",
    "REFUSALS",
    "CallOutcome",
    "ReplayReport",
    "ReplayVerdict",
    "TurnDecision",
    "TurnOutcome",
]

NOT_REACHED: Final = "not reached"
"""The verdict of a recorded call the replayed turn never got to (it ended earlier)."""

ReplayVerdict: TypeAlias = Verdict | Literal["not reached"]
"""A replayed call's verdict: its record's, or ``"not reached"`` when it has none."""

ORDER: Final[tuple[str, ...]] = (
    "allowed",
    "approved",
    "warned",
    "answered",
    "rejected",
    "denied",
    "invalid",
    "failed",
    "aborted",
    "not_run",
    NOT_REACHED,
)
"""The order verdicts are counted in (`ReplayReport.counts`)."""

REFUSALS: Final = frozenset({"denied", "rejected"})
"""Verdicts that count as the stack refusing a call (exit status 1)."""


@dataclass(frozen=True, slots=True)
class TurnDecision:
    """A decision about a tool that no recorded call led to, and where in the turn it was taken.

    A policy withdrawing a tool before the model ran, a limit hiding tools that appeared later.
    """

    decision: ToolDecision
    """What was decided (the `ToolDecided` event's decision)."""
    after_call: int | None
    """The transcript index of the last recorded call the turn had reached when it was taken
    (None: before any call of the turn)."""
    at_iteration: int | None
    """The iteration it was taken in, or the last one started (None: before the first model
    call)."""

    def where(self) -> str:
        """``before the model``, or ``iteration N, after #K`` (``before any call``)."""
        if self.at_iteration is None and self.after_call is None:
            return "before the model"
        after = "before any call" if self.after_call is None else f"after #{self.after_call}"
        return f"iteration {self.at_iteration}, {after}"

    def as_dict(self) -> dict[str, Any]:
        """Return the decision and where it was taken as plain JSON data."""
        return {
            **self.decision.as_dict(),
            "at_iteration": self.at_iteration,
            "after_call": self.after_call,
        }


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What the stack did about one recorded call: the record the replay stored for it."""

    call: RecordedCall
    """The recorded call."""
    stored: ToolCall | None
    """The call's record as the replay stored it, or None when the turn never reached it."""
    offered: bool | None
    """Whether the tool was offered to the model on that step (None when not reached)."""
    decisions: tuple[Decision, ...] = ()
    """The record's decisions, in order; an oscillation's reason names the arguments of the two
    calls rather than their checksums."""
    tool_decisions: tuple[ToolDecision, ...] = ()
    """Decisions about tools the call's outcome led to (the call that used up a limit hides its
    tool), in order."""
    alias: str | None = None
    """The name the call was replayed under, when its recorded name cannot be a loopware tool
    name (``Final Answer`` runs as ``Final_Answer``); policies see this name."""

    @property
    def verdict(self) -> ReplayVerdict:
        """The record's verdict (`ToolCall.verdict`), or ``"not reached"``."""
        stored = self.stored
        return NOT_REACHED if stored is None else stored.verdict

    @property
    def ran(self) -> bool | None:
        """Whether the replayed call's handler ran (the record's ``ran``); None: not reached."""
        stored = self.stored
        return None if stored is None else stored.ran

    @property
    def refused(self) -> bool:
        """True when the stack denied or rejected the call."""
        return self.verdict in REFUSALS

    @property
    def error(self) -> str | None:
        """The first line of the replayed call's error text, if it is an error."""
        stored = self.stored
        if stored is None or not stored.is_error or not isinstance(stored.results, str):
            return None
        return stored.results.splitlines()[0] if stored.results else ""

    def as_dict(self) -> dict[str, Any]:
        """Return the outcome as plain JSON data."""
        call = self.call
        return {
            "index": call.index,
            "turn": call.turn,
            "message_index": call.message_index,
            "line": call.line,
            "id": call.id,
            "replay_id": call.replay_id,
            "tool": call.tool,
            "alias": self.alias,
            "arguments": call.arguments,
            "result": call.result,
            "verdict": self.verdict,
            "offered": self.offered,
            "reached": self.stored is not None,
            "ran": self.ran,
            "error": self.error,
            "decisions": [d.as_dict() for d in self.decisions],
            "tool_decisions": [d.as_dict() for d in self.tool_decisions],
        }


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How one replayed turn ended."""

    turn: RecordedTurn
    """The recorded turn."""
    status: str
    """``completed``, ``failed`` or ``aborted``."""
    error_code: str | None
    """The code of the error that failed the turn (``E_POLICY_VIOLATION``...), if any."""
    error_message: str | None
    """That error's text, if any."""
    iterations: int
    """How many iterations the replayed turn ran."""
    decisions: tuple[TurnDecision, ...]
    """Decisions about tools no recorded call led to (a tool withdrawn before the model ran),
    with where they were taken."""
    calls: tuple[CallOutcome, ...]
    """One outcome per recorded call of the turn, in order."""
    after_call: int | None = None
    """The transcript index of the last recorded call the turn reached (None: none): a turn
    that ended early ended after it."""

    def as_dict(self, *, calls: bool = True) -> dict[str, Any]:
        """Return the outcome as plain JSON data (without ``calls`` when ``calls`` is False)."""
        data = {
            "index": self.turn.index,
            "message_index": self.turn.message_index,
            "input": self.turn.input,
            "answered": self.turn.answer is not None,
            "status": self.status,
            "error_code": self.error_code,
            "error": self.error_message,
            "iterations": self.iterations,
            "after_call": self.after_call,
            "decisions": [d.as_dict() for d in self.decisions],
        }
        if calls:
            data["calls"] = [c.as_dict() for c in self.calls]
        return data


@dataclass(frozen=True, slots=True, repr=False)
class ReplayReport:
    """Everything a replay found, plus the transcript's own issues."""

    transcript: Transcript
    """The transcript replayed."""
    middleware: tuple[str, ...]
    """How the middleware was named (``-m`` values, built-in policy flags), in order."""
    pipelines: dict[str, list[str]]
    """The replay runner's resolved stage order (``describe_pipelines()``)."""
    turns: tuple[TurnOutcome, ...]
    """One outcome per recorded turn."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """What each policy's decisions mean, by the policy's name (``loopware.limit``: ``limit
    reached``; see `policy_labels`)."""

    def __repr__(self) -> str:
        """A short summary (a report can hold 100,000 calls)."""
        return (
            f"ReplayReport(transcript={self.transcript.source!r}, turns={len(self.turns)}, "
            f"verdicts={self.counts()!r})"
        )

    @property
    def calls(self) -> tuple[CallOutcome, ...]:
        """Every call outcome, in transcript order."""
        return tuple(c for t in self.turns for c in t.calls)

    @property
    def refused(self) -> bool:
        """True when the stack denied or rejected a call or ended a turn early."""
        return any(t.status != "completed" for t in self.turns) or any(
            c.verdict in REFUSALS for c in self.calls
        )

    def counts(self) -> dict[str, int]:
        """How many calls got each verdict, in `ORDER` (only verdicts that occur)."""
        rank = {verdict: i for i, verdict in enumerate(ORDER)}
        found: dict[str, int] = {}
        for call in self.calls:
            found[call.verdict] = found.get(call.verdict, 0) + 1
        return {v: found[v] for v in sorted(found, key=lambda v: (rank.get(v, len(rank)), v))}

    def _head(self) -> dict[str, Any]:
        transcript = self.transcript
        return {
            "transcript": transcript.source,
            "format": transcript.format,
            "messages": transcript.message_count,
            "middleware": list(self.middleware),
            "pipelines": self.pipelines,
            "labels": dict(self.labels),
        }

    def _tail(self) -> dict[str, Any]:
        issues = self.transcript.issues
        return {
            "issues": [i.as_dict() for i in issues if not i.is_note],
            "notes": [i.as_dict() for i in issues if i.is_note],
            "summary": {"calls": sum(len(t.calls) for t in self.turns), "verdicts": self.counts()},
            "refused": self.refused,
        }

    def as_dict(self) -> dict[str, Any]:
        """Return the report as plain JSON data."""
        return {**self._head(), "turns": [t.as_dict() for t in self.turns], **self._tail()}

    def to_json(self) -> str:
        """Return the report as indented JSON text (``"".join(iter_json())``)."""
        return "".join(self.iter_json())

    def iter_json(self) -> Iterator[str]:
        """Yield the indented JSON text piece by piece, one call at a time.

        The text is the same as ``json.dumps(as_dict(), indent=2)``, but the whole report is
        never held as plain data at once: write the pieces to a stream for a large report.
        """
        yield "{"
        sep = "\n"
        for key, value in self._head().items():
            yield sep + _field(key, value, 2)
            sep = ",\n"
        if not self.turns:
            yield sep + '  "turns": []'
        else:
            yield sep + '  "turns": ['
            sep = "\n"
            for turn in self.turns:
                yield sep + "    {"
                fields = turn.as_dict(calls=False)
                inner = "\n"
                for key, value in fields.items():
                    yield inner + _field(key, value, 6)
                    inner = ",\n"
                if not turn.calls:
                    yield inner + '      "calls": []'
                else:
                    yield inner + '      "calls": ['
                    each = "\n"
                    for call in turn.calls:
                        yield each + " " * 8 + _indented(call.as_dict(), 8)
                        each = ",\n"
                    yield "\n      ]"
                yield "\n    }"
                sep = ",\n"
            yield "\n  ]"
        for key, value in self._tail().items():
            yield ",\n" + _field(key, value, 2)
        yield "\n}"


def _indented(value: object, level: int) -> str:
    """``value`` as indented JSON whose lines after the first are shifted by ``level``."""
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + " " * level)


def _field(key: str, value: object, level: int) -> str:
    return f"{' ' * level}{json.dumps(key)}: {_indented(value, level)}"
