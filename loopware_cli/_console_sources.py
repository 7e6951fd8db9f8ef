"""Where the console reads and answers: the audit sink, the turn store, the durable gates.

A gate is answered exactly as ``loopware approve`` answers it, through
`DurableClient.settle`; the console then appends an ``answer`` row to the audit chain naming who
answered (``console:<name>``), the gate, and the call and validated arguments it held. The
sink's, store's and client's blocking calls run in worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from middleware.audit import AuditEntry, AuditRow, AuditSink, AuditVerification
from pipeline import canonical_json
from pipeline.calls import ToolCall
from pipeline.durable import DurableClient, GateNotWaitingError, WaitingGate
from pipeline.stores import PostgresStore, SqliteStore

from ._console_data import usage_text
from ._console_hooks import HookApproval, HookApprovals

__all__ = [
    "ANSWER_POLICY",
    "AnswerNotRecordedError",
    "ConsoleSources",
    "GateAnswer",
    "HookNotWaitingError",
]

ANSWER_POLICY = "console"
"""The prefix of an ``answer`` row's ``policy``: ``console:<name>``."""


class AnswerNotRecordedError(Exception):
    """The gate was settled, but its ``answer`` row could not be appended (the cause chained)."""


class HookNotWaitingError(Exception):
    """The MCP gateway's approval no longer waits (answered, expired, or unknown)."""


@dataclass(frozen=True, slots=True)
class GateAnswer:
    """An answer to a gate, as the approvals page posts it."""

    gate_id: str
    """The gate's durable id."""
    approve: bool
    """Approve (True) or reject."""
    reason: str
    """Why (shown to the model on a rejection); may be empty."""


@dataclass(slots=True)
class ConsoleSources:
    """The stores a console reads: an audit sink, and optionally a turn store and gates.

    Args:
        sink: The audit chain (read, verified, and appended to when a gate is answered).
        store: The turn store the turns ran with (for result previews), if any.
        client: The durable runner's system database (gates, outcomes), if any.
        answerer: Who answers gates from this console (recorded as ``console:<answerer>``).
    """

    sink: AuditSink
    store: SqliteStore | PostgresStore | None = None
    client: DurableClient | None = None
    answerer: str = "console"
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    async def rows(self) -> list[AuditRow]:
        """Every row of the chain."""
        return await asyncio.to_thread(self.sink.rows)

    async def fingerprint(self) -> str:
        """What changes when a row is added anywhere: the row count and the last row's hash.

        Read from the log itself, not from the sink's head: the head a sink keeps is the one it
        wrote or read, and the rows the console shows are written by other processes.
        """
        try:
            rows = await self.rows()
        except ValueError as exc:  # a row that does not parse: the pages say so
            return f"unreadable:{exc}"
        return f"{len(rows)}:{rows[-1].hash if rows else ''}"

    async def verify(self) -> AuditVerification:
        """The chain's verification."""
        return await asyncio.to_thread(self.sink.verify)

    async def waiting(self) -> list[WaitingGate]:
        """The gates turns wait on now (none without a durable system database)."""
        if self.client is None:
            return []
        return await asyncio.to_thread(self.client.waiting_gates)

    async def usage(self, turn_ids: list[str]) -> dict[str, str]:
        """The token usage of those durable turns that finished."""
        if self.client is None or not turn_ids:
            return {}
        outcomes = await asyncio.to_thread(self.client.outcomes, turn_ids)
        found = {}
        for turn_id, outcome in outcomes.items():
            text = usage_text(outcome.get("stash") or {})
            if text is not None:
                found[turn_id] = text
        return found

    async def stored_calls(self, turn_id: str) -> list[ToolCall]:
        """The calls the store keeps for ``turn_id`` (none without a store)."""
        if self.store is None:
            return []
        return await self.store.tool_calls_for_turn(turn_id)

    async def answer(self, answer: GateAnswer) -> AuditRow:
        """Settle the gate as ``loopware approve`` does, then append its ``answer`` row.

        Raises:
            GateNotWaitingError: no turn waits on the gate (answered meanwhile, or unknown).
            AnswerNotRecordedError: the gate was settled; its audit row could not be written.
        """
        client = self.client
        if client is None:
            raise GateNotWaitingError(
                f"no durable system database: gate {answer.gate_id!r} cannot be answered here",
                gate_id=answer.gate_id,
            )
        async with self._lock:  # one answer at a time: the row follows its own settle
            gates = await asyncio.to_thread(client.waiting_gates)
            gate = next((g for g in gates if g["gate_id"] == answer.gate_id), None)
            if gate is None:
                raise GateNotWaitingError(
                    f"no turn waits on gate {answer.gate_id!r}", gate_id=answer.gate_id
                )
            who = f"{ANSWER_POLICY}:{self.answerer}"
            said = answer.reason.strip()
            to_model = f"rejected by {who}" + (f": {said}" if said else "")
            await asyncio.to_thread(
                client.settle,
                answer.gate_id,
                approve=answer.approve,
                reason=None if answer.approve else to_model,
            )
            try:
                rows = await self.sink.append([_answer_entry(gate, answer, who, said)])
            except Exception as exc:  # the sink's own error, whatever it is: say what happened
                raise AnswerNotRecordedError(
                    f"the gate {answer.gate_id!r} was answered, but its audit row was not "
                    f"written: {exc}"
                ) from exc
        return rows[0]

    async def answer_hook(self, hooks: HookApprovals, answer: GateAnswer) -> AuditRow:
        """Answer the MCP gateway's approval ``answer.gate_id`` (a hook id of ``hooks``).

        The ``answer`` row is appended before the webhook is answered, so an approval is only
        given once who gave it is recorded (a row that cannot be written rejects the call).

        Raises:
            HookNotWaitingError: the approval no longer waits (the gateway gave up, or it was
                answered already); nothing is written.
            AnswerNotRecordedError: the row could not be written; the call was rejected.
        """
        async with self._lock:
            approval = hooks.take(answer.gate_id)
            if approval is None:
                said = "expired" if hooks.is_expired(answer.gate_id) else "does not wait"
                raise HookNotWaitingError(
                    f"the MCP gateway's approval {answer.gate_id!r} {said} (the gateway "
                    "stopped waiting, or it was answered): nothing was answered"
                )
            who = f"{ANSWER_POLICY}:{self.answerer}"
            said = answer.reason.strip()
            try:
                rows = await self.sink.append([_hook_entry(approval, answer.approve, who, said)])
            except Exception as exc:  # fail closed: no recorded answer, no approval
                hooks.settle(answer.gate_id, False, "the console could not record it")
                raise AnswerNotRecordedError(
                    f"the MCP gateway's call {approval.call_id!r} was rejected: its answer row "
                    f"could not be written: {exc}"
                ) from exc
            if not hooks.settle(answer.gate_id, answer.approve, said or None):
                raise HookNotWaitingError(
                    f"the MCP gateway stopped waiting for {approval.call_id!r} while its answer "
                    f"was recorded (row {rows[0].index}); the gateway rejected the call"
                )
        return rows[0]

    def close(self) -> None:
        """Close the sink, the store and the client."""
        self.sink.close()
        if self.store is not None:
            self.store.close()
        if self.client is not None:
            self.client.close()


def _answer_entry(gate: WaitingGate, answer: GateAnswer, who: str, reason: str) -> AuditEntry:
    payload: Any = gate["payload"]
    held = payload if isinstance(payload, dict) else {}
    tool, call_id = held.get("tool"), held.get("call_id")
    return AuditEntry(
        kind="answer",
        turn_id=answer.gate_id.rpartition(":gate-")[0],
        conversation_id=None,
        recorded_at=datetime.now(UTC),
        call_id=call_id if isinstance(call_id, str) else None,
        tool=tool if isinstance(tool, str) else None,
        checksum=answer.gate_id,
        args=canonical_json(held.get("args", payload)),
        decision="approved" if answer.approve else "rejected",
        policy=who,
        reason=reason or None,
    )


def _hook_entry(approval: HookApproval, approve: bool, who: str, reason: str) -> AuditEntry:
    return AuditEntry(
        kind="answer",
        turn_id=approval.turn_id or "",
        conversation_id=approval.conversation,
        recorded_at=datetime.now(UTC),
        call_id=approval.call_id,
        tool=approval.tool,
        checksum=approval.gate or f"mcp-gateway:{approval.call_id}",
        args=canonical_json(approval.args),
        decision="approved" if approve else "rejected",
        policy=who,
        reason=reason or None,
    )
