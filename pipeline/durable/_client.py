"""`DurableClient`: queue turns, wait for them and settle gates from any process.

A client needs only the system database URL: no tools, model or worker (DBOS's ``DBOSClient``).
``loopware approve`` and the load benchmark use it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from typing_extensions import TypedDict

from ._checks import check_options, check_turn, check_waiting, load_dbos
from ._gates import GATE_EVENT, decision_message, split_gate_id
from ._outcome import DurableTurnOutcome
from ._runner import DEFAULT_QUEUE

__all__ = ["DurableClient", "WaitingGate"]

_WORKFLOW_NAME = "loopware.turn"  # ``_workflow.WORKFLOW_NAME``, without importing the workflow


_ENDED = frozenset({"ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})


class WaitingGate(TypedDict):
    """A gate a turn waits on (plain data)."""

    gate_id: str
    """Its durable id, ``<turn id>:gate-<n>``."""
    reason: str
    """Why the turn waits."""
    payload: Any
    """What the approver needs (for `middleware.ApprovalGate`: the tool and arguments)."""


class DurableClient:
    """Talks to the system database of durable turns without running any.

    Args:
        system_database: The DBOS system database URL the workers use.
        queue: The queue turns are put on.
        app_name: The workers' DBOS application name.

    Raises:
        DurableConfigError: a bad option, or ``dbos`` is not installed.
    """

    __slots__ = ("_app_name", "_client", "_queue")

    def __init__(
        self, system_database: str, *, queue: str = DEFAULT_QUEUE, app_name: str = "loopware"
    ) -> None:
        """Connect to the system database (see the class docstring)."""
        check_options(system_database, queue, 1, 1.0, app_name)
        dbos = load_dbos()
        dbos.DBOS.migrate(system_database)  # idempotent: a client may come before any worker
        self._client = dbos.DBOSClient(
            system_database_url=system_database, application_name=app_name
        )
        self._queue = queue
        self._app_name = app_name

    def __repr__(self) -> str:
        """Show the queue."""
        return f"DurableClient(queue={self._queue!r})"

    def __enter__(self) -> DurableClient:
        """Use the client in a ``with`` block (closed at its end)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the client."""
        self.close()

    def close(self) -> None:
        """Release the client's connections."""
        self._client.destroy()

    def enqueue(
        self,
        input: str,
        *,
        conversation_id: str | None = None,
        stash: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> str:
        """Queue a turn for the workers; return its id. Enqueueing an id again is a no-op."""
        turn_id, plain = check_turn(input, conversation_id, stash, turn_id)
        options = {
            "queue_name": self._queue,
            "workflow_name": _WORKFLOW_NAME,
            "workflow_id": turn_id,
        }
        self._client.enqueue(options, input, conversation_id, plain)
        return turn_id

    def status(self, turn_id: str) -> str | None:
        """The turn's workflow status (``ENQUEUED``, ``PENDING``, ``SUCCESS``...), or None."""
        found = self._client.list_workflows(workflow_ids=[turn_id], load_input=False)
        return found[0].status if found else None

    def statuses(self, turn_ids: Sequence[str]) -> dict[str, str]:
        """Each known turn's workflow status, in one query."""
        found = self._client.list_workflows(
            workflow_ids=list(turn_ids), load_input=False, load_output=False
        )
        return {w.workflow_id: w.status for w in found}

    def outcomes(self, turn_ids: Sequence[str]) -> dict[str, DurableTurnOutcome]:
        """The outcomes of those of ``turn_ids`` that finished, in one query."""
        found = self._client.list_workflows(workflow_ids=list(turn_ids), load_input=False)
        return {w.workflow_id: w.output for w in found if w.status == "SUCCESS"}

    def result(self, turn_id: str, *, timeout: float | None = None) -> DurableTurnOutcome:
        """Wait for a turn's outcome (``timeout`` seconds at most: `TimeoutError`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = self._client.list_workflows(workflow_ids=[turn_id], load_input=False)
            if found and found[0].status == "SUCCESS":
                outcome: DurableTurnOutcome = found[0].output
                return outcome
            if found and found[0].status in _ENDED:
                raise RuntimeError(f"turn {turn_id!r} ended {found[0].status}: {found[0].error}")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"turn {turn_id!r} did not finish within {timeout}s")
            time.sleep(0.1)

    def waiting_gates(self) -> list[WaitingGate]:
        """The gates unfinished turns wait on now."""
        gates: list[WaitingGate] = []
        pending = self._client.list_workflows(
            status="PENDING", name=_WORKFLOW_NAME, load_input=False, load_output=False
        )
        for workflow in pending:
            event = self._client.get_event(workflow.workflow_id, GATE_EVENT, timeout_seconds=0)
            if isinstance(event, Mapping) and event.get("state") == "waiting":
                gates.append(
                    WaitingGate(
                        gate_id=str(event.get("gate_id")),
                        reason=str(event.get("reason")),
                        payload=event.get("payload"),
                    )
                )
        return gates

    def settle(
        self, gate_id: str, *, approve: bool = True, reason: str | None = None, value: Any = None
    ) -> None:
        """Approve (with ``value``, default True) or reject the gate a turn waits on.

        Raises:
            GateNotWaitingError: no turn waits on ``gate_id``.
        """
        workflow_id = split_gate_id(gate_id)
        check_waiting(gate_id, self._client.get_event(workflow_id, GATE_EVENT, timeout_seconds=0))
        message = decision_message(approve, reason=reason, value=value)
        self._client.send(workflow_id, message, gate_id, idempotency_key=gate_id)


for _cls in (DurableClient, WaitingGate):
    _cls.__module__ = "pipeline.durable"
