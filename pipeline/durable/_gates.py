"""Durable gate waits: a gate a durable turn opens is settled by a DBOS message.

When a turn running as a workflow opens a `Gate` (``ctx.wait_for``, `middleware.ApprovalGate`),
the runner's `GateOpened` listener gives it a durable id, ``<turn id>:gate-<n>`` (gates are
numbered in the order the turn opens them, so a re-run names them the same), publishes it as the
workflow event `GATE_EVENT` and waits for a message on that topic (``DBOS.recv``). The message can
come hours later from any process (`DurableClient.settle`, ``loopware approve``); a worker that
stopped meanwhile is replaced by one that re-runs the turn to the same gate, where the recorded
message settles it. Whoever settles the gate first wins: an in-process approver still can.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..errors import LoopError
from ._errors import GateNotWaitingError
from ._replay import current_run

if TYPE_CHECKING:
    from .._events import GateClosed, GateOpened
    from .._gate import Gate

__all__ = [
    "GATE_EVENT",
    "GateListener",
    "decision_message",
    "gate_waiter",
    "split_gate_id",
]

GATE_EVENT: Final = "loopware.gate"
"""The workflow event naming the gate the turn waits on: ``{"gate_id", "reason", "payload",
"state"}`` with ``state`` ``"waiting"`` or ``"settled"``."""

FOREVER: Final = 10 * 365 * 24 * 3600.0
"""How long a gate without a timeout waits for its message (ten years, in seconds)."""

SETTLED_GRACE: Final = 0.25
"""Seconds a gate's wait may take before it is announced: a re-run turn reaches a gate settled
before (its message recorded, or sent while no worker ran) and gets its message within this."""

GateListener = Callable[[str, "Gate[Any]"], object]
"""Told ``(durable gate id, gate)`` once a durable turn waits on a gate (announced, so it can
be settled from now on). A gate whose decision is already there (a turn re-run after a restart
reaches a gate settled before) is not announced."""


def split_gate_id(gate_id: str) -> str:
    """The workflow (turn) id of a durable gate id.

    Raises:
        GateNotWaitingError: ``gate_id`` is not of the form ``<turn id>:gate-<n>``.
    """
    head, sep, tail = gate_id.rpartition(":gate-")
    if not sep or not head or not tail.isdigit():
        raise GateNotWaitingError(
            f"{gate_id!r} is not a durable gate id (<turn id>:gate-<n>)", gate_id=gate_id
        )
    return head


def decision_message(
    approve: bool, *, reason: str | None = None, value: Any = None
) -> dict[str, Any]:
    """The message that settles a gate: approve (with ``value``, default True) or reject."""
    if approve:
        return {"approve": True, "value": True if value is None else value}
    return {"approve": False, "reason": reason}


def settle(gate: Gate[Any], message: object) -> None:
    """Settle ``gate`` as ``message`` says; a malformed message or value rejects it."""
    if not isinstance(message, Mapping):
        gate.reject(f"gate {gate.id!r} got a malformed decision: {message!r}")
        return
    if message.get("approve") is True:
        try:
            gate.resolve(message.get("value"))
        except LoopError as exc:  # the value failed the gate's schema
            gate.reject(exc)
        return
    reason = message.get("reason")
    gate.reject(reason if isinstance(reason, str) and reason.strip() else None)


def gate_waiter(
    on_gate: GateListener | None,
) -> tuple[Callable[[GateOpened], None], Callable[[GateClosed], None]]:
    """The `GateOpened` and `GateClosed` listeners of a durable runner."""

    def opened(event: GateOpened) -> None:
        run = current_run()
        if run is None:
            return
        gate = event.gate
        durable_id = run.next_gate_id()
        run.waits[gate.id] = asyncio.ensure_future(_wait(gate, durable_id, on_gate))

    def closed(event: GateClosed) -> None:
        run = current_run()
        if run is None:
            return
        wait = run.waits.pop(event.gate_id, None)
        if wait is not None and not wait.done():
            wait.cancel()

    return opened, closed


async def _wait(gate: Gate[Any], durable_id: str, on_gate: GateListener | None) -> None:
    from dbos import DBOS

    announce = {"gate_id": durable_id, "reason": gate.reason, "payload": gate.payload}
    await DBOS.set_event_async(GATE_EVENT, {**announce, "state": "waiting"})
    timeout = gate.timeout
    seconds = FOREVER if timeout is None or not math.isfinite(timeout) else timeout
    received = asyncio.ensure_future(DBOS.recv_async(durable_id, timeout_seconds=seconds))
    try:
        if on_gate is not None:
            # A decision already there comes at once: only a gate still open is announced.
            done, _ = await asyncio.wait({received}, timeout=min(SETTLED_GRACE, seconds))
            if not done:
                with contextlib.suppress(Exception):  # a listener's failure never holds the turn
                    on_gate(durable_id, gate)
        message = await received
    finally:
        received.cancel()  # the gate closed first (an in-process approver): stop waiting
    if message is None:
        return  # timed out: the gate's own timeout settles it
    # recorded before the gate settles, so the turn's next step cannot interleave with it
    await DBOS.set_event_async(GATE_EVENT, {**announce, "state": "settled"})
    settle(gate, message)
