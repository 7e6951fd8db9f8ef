"""What a replay found: decisions per recorded call and per turn, as values."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pipeline import ToolCall

    from ._types import RecordedCall, RecordedTurn, Transcript

__all__ = [
    "FAILED",
    "NOT_REACHED",
    "REFUSALS",
    "SEVERITY",
    "CallOutcome",
    "Decision",
    "ReplayReport",
    "TurnOutcome",
]

SEVERITY: Final[Mapping[str, int]] = {
    "allowed": 0,
    "approved": 1,
    "warned": 2,
    "hidden": 3,
    "rejected": 4,
    "denied": 5,
}
"""How strong each policy action is; a call's verdict is its strongest decision."""

REFUSALS: Final = frozenset({"denied", "rejected"})
"""Verdicts that count as the stack refusing a call (exit status 1)."""

FAILED: Final = "failed"
"""The verdict of a call no policy refused whose replay failed (its recorded result was an error,
its arguments were not valid JSON, ...)."""

NOT_REACHED: Final = "not reached"
"""The verdict of a recorded call the replayed turn never got to (it ended earlier)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision a policy took during the replay."""

    policy: str
    """The policy's name (its stash namespace for the built-ins)."""
    tool: str | None
    """The tool it concerns, if any."""
    action: str
    """``allowed``, ``hidden``, ``denied``, ``approved``, ``rejected`` or ``warned``."""
    reason: str
    """Why, as the policy put it."""
    iteration: int | None
    """The iteration it was taken in (None in a turn stage)."""
    label: str | None = None
    """What kind of decision it is (``repeat detected``, ``limit reached``, ...), if known."""
    after_call: int | None = None
    """For a decision about no one call: the transcript index of the last recorded call the
    turn had reached when it was taken (None: before any call of the turn)."""
    at_iteration: int | None = None
    """For a decision about no one call: the iteration it was taken in, or the last one
    started (None: before the first model call)."""

    def key(self) -> tuple[object, ...]:
        """Identity used to avoid counting a decision seen both as a log and in the stash."""
        return (self.tool, self.iteration, self.action, self.reason)

    def labelled(self, labels: Mapping[str, str]) -> Decision:
        """Return this decision with the label of its policy, when one is known."""
        label = labels.get(self.policy)
        return self if label is None else replace(self, label=label)

    def describe(self) -> str:
        """Return ``action: label: reason [policy]``."""
        kind = f"{self.label}: " if self.label else ""
        return f"{self.action}: {kind}{self.reason} [{self.policy}]"

    def where(self) -> str:
        """Where a turn-level decision was taken.

        ``before the model``, or ``iteration N, after #K`` (``iteration N, before any call``
        when the turn had reached none).
        """
        if self.at_iteration is None and self.after_call is None:
            return "before the model"
        after = "before any call" if self.after_call is None else f"after #{self.after_call}"
        return f"iteration {self.at_iteration}, {after}"

    def as_dict(self) -> dict[str, Any]:
        """Return the decision as plain JSON data."""
        return {
            "policy": self.policy,
            "tool": self.tool,
            "action": self.action,
            "label": self.label,
            "reason": self.reason,
            "iteration": self.iteration,
            "at_iteration": self.at_iteration,
            "after_call": self.after_call,
        }


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What the stack did about one recorded call."""

    call: RecordedCall
    """The recorded call."""
    stored: ToolCall | None
    """The call as the replay stored it, or None when the turn never reached it."""
    offered: bool | None
    """Whether the tool was offered to the model on that step (None when not reached)."""
    decisions: tuple[Decision, ...]
    """Every decision about the call, in order."""
    verdict: str
    """The strongest decision's action, ``allowed`` when none, or ``not reached``."""
    ran: bool | None = None
    """Whether the replayed call's handler ran (False: refused before it ran; None: not
    reached)."""
    alias: str | None = None
    """The name the call was replayed under, when its recorded name cannot be a loopware tool
    name (``Final Answer`` runs as ``Final_Answer``); policies see this name."""

    @property
    def refused(self) -> bool:
        """True when the stack denied or rejected the call."""
        return self.verdict in REFUSALS

    @property
    def error(self) -> str | None:
        """The first line of the replayed call's error text, if it failed."""
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
            "ran": self.ran if self.stored is not None else None,
            "error": self.error,
            "decisions": [d.as_dict() for d in self.decisions],
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
    decisions: tuple[Decision, ...]
    """Decisions not about one recorded call (a tool removed before the model ran, say)."""
    calls: tuple[CallOutcome, ...]
    """One outcome per recorded call of the turn, in order."""

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
        """How many calls got each verdict, in severity order (only verdicts that occur)."""
        rank = {verdict: i for i, verdict in enumerate((*SEVERITY, FAILED, NOT_REACHED))}
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
