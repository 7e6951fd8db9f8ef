"""The DBOS workflow that runs one durable turn (imports ``dbos``: loaded only when launched).

The workflow is registered under `WORKFLOW_NAME` when this module is imported, before
``DBOS.launch()``; it runs the turn on the process's installed runner (`install`), inside a
`WorkflowRun` and a deterministic id source, so that a re-run after a crash takes the same path
(see ``_replay.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbos import DBOS

from .._ids import reset_id_source, use_id_source
from ._errors import DurableConfigError
from ._outcome import DurableTurnOutcome, outcome_of
from ._replay import WorkflowRun, enter_run, leave_run

if TYPE_CHECKING:
    from .._runner import TurnRunner

__all__ = ["WORKFLOW_NAME", "install", "run_turn"]

WORKFLOW_NAME = "loopware.turn"
"""The workflow's registered name (what `DurableClient` enqueues)."""

_installed: list[TurnRunner] = []


def install(runner: TurnRunner) -> None:
    """Make ``runner`` the one this process runs durable turns on."""
    _installed[:] = [runner]


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_turn(
    input: str, conversation_id: str | None, stash: dict[str, Any] | None
) -> DurableTurnOutcome:
    """Run one turn as a workflow; return its outcome (plain data)."""
    if not _installed:
        raise DurableConfigError("no DurableTurnRunner was launched in this process")
    workflow_id = DBOS.workflow_id
    if workflow_id is None:  # DBOS always runs a workflow with its id
        raise DurableConfigError("run_turn runs only as a DBOS workflow")
    run = WorkflowRun(workflow_id)
    entered = enter_run(run)
    ids = use_id_source(run.mint)
    try:
        result = await _installed[0].run(input, stash=stash, conversation_id=conversation_id)
    finally:
        reset_id_source(ids)
        leave_run(entered)
    if run.diverged is not None:
        raise run.diverged
    return outcome_of(result)
