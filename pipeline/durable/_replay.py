"""What one run of a durable turn's workflow keeps while it runs (or re-runs after a crash).

A DBOS workflow is re-executed from its start on recovery: completed steps return their recorded
outputs and everything between them runs again. The turn therefore has to take the same path
again: ids are minted deterministically from the workflow id (`WorkflowRun.mint`, installed
with ``pipeline._ids.use_id_source``), gates are numbered in the order they open, and every step
records a digest of the stash as it stood when the step began, which the re-run checks
(`WorkflowRun.check`): the stash is rebuilt by replaying the same middleware on the same
recorded outputs, and the digest proves it was.
"""

from __future__ import annotations

import asyncio
import hashlib
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from .._json import canonical_json
from ._errors import ReplayDivergedError

if TYPE_CHECKING:
    from .._stash import Stash

__all__ = ["WorkflowRun", "current_run", "enter_run", "leave_run", "stash_digest"]


def stash_digest(stash: Stash | None) -> str:
    """A short digest of the stash's plain data (canonical JSON, so key order does not count)."""
    if stash is None:
        return ""
    text = canonical_json(stash.all())
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class WorkflowRun:
    """The state of one execution of one turn's workflow."""

    __slots__ = ("diverged", "gates", "ids", "stash", "waits", "workflow_id")

    def __init__(self, workflow_id: str) -> None:
        """Start the run of ``workflow_id`` (also the turn's id)."""
        self.workflow_id = workflow_id
        self.ids = 0
        self.gates = 0
        self.stash: Stash | None = None
        """The turn's stash, known once the executor first runs."""
        self.waits: dict[str, asyncio.Future[Any]] = {}
        """Durable gate waits in flight, by the in-process gate id."""
        self.diverged: ReplayDivergedError | None = None

    def __repr__(self) -> str:
        """Show the workflow id and counters."""
        return f"WorkflowRun({self.workflow_id!r}, ids={self.ids}, gates={self.gates})"

    def mint(self, kind: str) -> str:
        """The next id of ``kind``: the turn's id is the workflow id; others count up."""
        if kind == "turn":
            return self.workflow_id
        self.ids += 1
        return f"{kind}_{self.workflow_id}.{self.ids:x}"

    def next_gate_id(self) -> str:
        """The durable id of the next gate this turn opens (what ``loopware approve`` takes)."""
        self.gates += 1
        return f"{self.workflow_id}:gate-{self.gates}"

    def check(self, recorded: str, current: str, step: str) -> None:
        """Compare a step's recorded stash digest with the replayed one; remember a mismatch."""
        if recorded != current and self.diverged is None:
            self.diverged = ReplayDivergedError(
                f"turn {self.workflow_id!r}: the stash at step {step!r} differs from the one "
                "checkpointed there (a middleware keeps state that replay cannot rebuild)",
                step=step,
            )


_RUN: ContextVar[WorkflowRun | None] = ContextVar("loopware_durable_run", default=None)


def current_run() -> WorkflowRun | None:
    """The workflow run of the current context, or None outside a durable turn."""
    return _RUN.get()


def enter_run(run: WorkflowRun) -> Token[WorkflowRun | None]:
    """Make ``run`` current (returns the token for `leave_run`)."""
    return _RUN.set(run)


def leave_run(token: Token[WorkflowRun | None]) -> None:
    """Undo `enter_run`."""
    _RUN.reset(token)
