"""`AuditLog`: a tamper-evident row per stored tool call (and per change of it) and per turn.

`AuditLog` is an event observer, not a stage middleware: hand it to
``TurnRunner(middleware=[...])`` and it subscribes to the runner's events, so no middleware can
skip it by short-circuiting a stage. It reads:

- ``ToolExecutionEnd``: how long each handler ran (matched to its call by call id);
- ``ToolCallStored``: a call was persisted. Its row is appended **at once**, with the decision
  known by then, so every stored call has a row as soon as the store returned (a process
  killed later in the iteration keeps it), not only at the iteration's end;
- ``Log`` records of kind ``"policy.decision"``: what policy middleware decided about a call,
  matched by ``call_id`` when given, else by ``checksum`` (within the iteration). A decision
  taken before the store (the ``tool_call`` stage) is part of the call's row. A decision
  taken after it (``dispatch_output``: a repetition hide, a warning, a policy's record of a
  custom executor's call) that changes the call's decision (at least as strong, in the order
  of `DECISIONS`; ``allowed`` when nobody decided) appends the call's row again with the new
  decision, stamped with the decision's time;
- ``TurnEnd``: the turn's row.

So a call has one row per change: stored, stored again (``mutate_tool_call``: the new form),
decided. **The last row of a call id is the call's final form**; count distinct call ids to
count calls. Every row is chained to the previous one by its hash (see ``sink.verify()``). The
``TurnEnd`` listener returns an awaitable that the runner awaits before ``run()`` returns, so
the turn's rows are written by then. Appends of concurrent turns go to the sink in event order
and form one chain per sink.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from datetime import datetime
from typing import Any, Final

from pipeline import (
    EventSource,
    InvalidMiddlewareConfigError,
    IterationEnd,
    Log,
    ToolCall,
    ToolCallStored,
    ToolExecutionEnd,
    TurnEnd,
    TurnStart,
    canonical_json,
)

from ._chain import DECISIONS, AuditDecision, AuditEntry, AuditRow, AuditSink
from ._sqlite import SqliteAuditSink

__all__ = ["DEFAULT_AUDIT_PATH", "AuditLog"]

DEFAULT_AUDIT_PATH = "loopware-audit.sqlite"
"""Where ``AuditLog()`` without a sink writes: this file in the current directory."""

_RANK = {decision: rank for rank, decision in enumerate(DECISIONS)}

Decision = tuple[AuditDecision, str | None, str | None]
"""A decision with the policy that took it and its reason."""


_PRUNE_AT: Final = 64


class _TurnAudit:
    """What the log has collected about one in-flight turn."""

    __slots__ = (
        "by_checksum",
        "conversation_id",
        "durations",
        "input",
        "iteration",
        "pending",
        "prune_at",
        "writes",
        "written",
    )

    def __init__(self, conversation_id: str | None, input: str | None) -> None:
        self.conversation_id = conversation_id
        self.input = input
        self.durations: dict[str, deque[float]] = {}
        self.pending: dict[str, Decision] = {}
        """Decisions by call id about calls not stored yet."""
        self.by_checksum: dict[str, Decision] = {}
        """Decisions by checksum this iteration (for calls stored later in it)."""
        self.iteration: dict[str, list[str]] = {}
        """Ids of the calls stored this iteration, by checksum."""
        self.prune_at = _PRUNE_AT
        """``writes`` is pruned of finished writes when it grows this long (then twice the
        length left)."""
        self.written: dict[str, tuple[ToolCall, Decision, float | None]] = {}
        """Calls with a row: the call as last written, its decision so far, its duration."""
        self.writes: list[asyncio.Future[list[AuditRow]]] = []


_ALLOWED: Decision = ("allowed", None, None)


def _stronger(old: Decision | None, new: Decision) -> Decision:
    return new if old is None or _RANK[new[0]] >= _RANK[old[0]] else old


class AuditLog:
    """Writes a hash-chained audit row per stored tool call (and per change of it) and per turn.

    A call's row is appended when the call is stored (``ToolCallStored``), with the decisions
    taken before the store. A decision taken after it that changes the call's decision, or a
    new store of the call (mutated), appends the call's row again: the last row of a call id
    is its final form. See the module docstring for the whole protocol.

    Args:
        sink: Where rows go (`SqliteAuditSink`, `JsonlAuditSink`, or anything implementing
            `AuditSink`). ``None`` opens ``SqliteAuditSink("loopware-audit.sqlite")`` in the
            current directory.

    Raises:
        InvalidMiddlewareConfigError: ``sink`` lacks ``append``, ``rows`` or ``verify``.
    """

    __slots__ = ("_sink", "_turns")

    def __init__(self, sink: AuditSink | None = None) -> None:
        """Validate the sink (see the class docstring)."""
        if sink is None:
            sink = SqliteAuditSink(DEFAULT_AUDIT_PATH)
        missing = [m for m in ("append", "rows", "verify") if not callable(getattr(sink, m, None))]
        if missing:
            raise InvalidMiddlewareConfigError(
                f"AuditLog sink {sink!r} has no {', '.join(missing)} method", field="sink"
            )
        self._sink = sink
        self._turns: dict[str, _TurnAudit] = {}

    def __repr__(self) -> str:
        """Show the sink and how many turns are in flight."""
        return f"AuditLog({self._sink!r}, turns_in_flight={len(self._turns)})"

    @property
    def sink(self) -> AuditSink:
        """Where the rows go (read them with ``sink.rows()``, check them with ``sink.verify()``)."""
        return self._sink

    def observe(self, events: EventSource) -> None:
        """Subscribe to ``events`` (the runner calls this when the log is handed to it)."""
        events.on(TurnStart, self._on_turn_start)
        events.on(ToolExecutionEnd, self._on_execution_end)
        events.on(ToolCallStored, self._on_call_stored)
        events.on(Log, self._on_log)
        events.on(IterationEnd, self._on_iteration_end)
        events.on(TurnEnd, self._on_turn_end)

    def close(self) -> None:
        """Close the sink (finishing queued appends)."""
        close = getattr(self._sink, "close", None)
        if callable(close):
            close()

    # -- listeners --------------------------------------------------------------------------
    def _turn(self, turn_id: str) -> _TurnAudit:
        state = self._turns.get(turn_id)
        if state is None:  # observed from the middle of a turn: record what we can
            state = self._turns[turn_id] = _TurnAudit(None, None)
        return state

    def _on_turn_start(self, event: TurnStart) -> None:
        self._turns[event.turn_id] = _TurnAudit(event.conversation_id, event.input)

    def _on_execution_end(self, event: ToolExecutionEnd) -> None:
        durations = self._turn(event.turn_id).durations
        durations.setdefault(event.call_id, deque()).append(event.duration_ms)

    def _on_call_stored(self, event: ToolCallStored) -> None:
        state = self._turn(event.turn_id)
        call = event.call
        queue = state.durations.get(call.id)
        duration = queue.popleft() if queue else None
        if queue is not None and not queue:
            del state.durations[call.id]
        decision = _ALLOWED
        previous = state.written.get(call.id)  # stored again (mutated): keep what we knew
        if previous is not None:
            decision = previous[1]
            if duration is None:
                duration = previous[2]
        for earlier in (state.by_checksum.get(call.checksum), state.pending.pop(call.id, None)):
            if earlier is not None:
                decision = _stronger(decision, earlier)
        ids = state.iteration.setdefault(call.checksum, [])
        if call.id not in ids:
            ids.append(call.id)
        self._write_call(event.turn_id, state, call, decision, duration, event.timestamp)

    def _write_call(
        self,
        turn_id: str,
        state: _TurnAudit,
        call: ToolCall,
        decision: Decision,
        duration: float | None,
        at: datetime,
    ) -> None:
        state.written[call.id] = (call, decision, duration)
        entry = AuditEntry(
            kind="tool_call",
            turn_id=turn_id,
            conversation_id=state.conversation_id,
            recorded_at=at,
            call_id=call.id,
            tool=call.tool,
            checksum=call.checksum,
            args=canonical_json(call.args),
            is_error=call.is_error,
            duration_ms=duration,
            decision=decision[0],
            policy=decision[1],
            reason=decision[2],
        )
        writes = state.writes
        writes.append(self._sink_append([entry]))
        if len(writes) >= state.prune_at:
            # A long turn (the gateway's session) would keep every row's future to its end:
            # only the unfinished and the failed ones matter to `_settle`.
            writes[:] = [w for w in writes if not w.done() or w.cancelled() or w.exception()]
            state.prune_at = 2 * len(writes) + _PRUNE_AT

    def _on_log(self, event: Log) -> None:
        if event.kind != "policy.decision":
            return
        payload: dict[str, Any] = event.payload
        action = payload.get("action")
        if not isinstance(action, str) or action not in _RANK:
            return
        policy, reason = payload.get("policy"), payload.get("reason")
        decision: Decision = (
            action,
            policy if isinstance(policy, str) else None,
            reason if isinstance(reason, str) else None,
        )
        state = self._turn(event.turn_id)
        call_id, checksum = payload.get("call_id"), payload.get("checksum")
        if isinstance(call_id, str):
            if call_id in state.written:
                self._decided(event, state, call_id, decision)
            else:
                state.pending[call_id] = _stronger(state.pending.get(call_id), decision)
        elif isinstance(checksum, str):
            state.by_checksum[checksum] = _stronger(state.by_checksum.get(checksum), decision)
            for written_id in state.iteration.get(checksum, ()):
                self._decided(event, state, written_id, decision)

    def _decided(self, event: Log, state: _TurnAudit, call_id: str, decision: Decision) -> None:
        """A decision about a call that has a row: write the row again if its decision changes."""
        call, current, duration = state.written[call_id]
        stronger = _stronger(current, decision)
        if stronger != current:
            self._write_call(event.turn_id, state, call, stronger, duration, event.timestamp)

    def _on_iteration_end(self, event: IterationEnd) -> None:
        state = self._turns.get(event.turn_id)
        if state is not None:
            state.by_checksum.clear()
            state.iteration.clear()

    def _on_turn_end(self, event: TurnEnd) -> Awaitable[None]:
        state = self._turns.pop(event.turn_id, None) or _TurnAudit(None, None)
        error = event.error
        entry = AuditEntry(
            kind="turn",
            turn_id=event.turn_id,
            conversation_id=state.conversation_id,
            recorded_at=event.timestamp,
            is_error=event.status == "failed",
            duration_ms=event.duration_ms,
            status=event.status,
            error=None if error is None else str(error),
            input=state.input,
        )
        state.writes.append(self._sink_append([entry]))
        return self._settle(state.writes)

    # -- helpers ----------------------------------------------------------------------------
    def _sink_append(self, entries: list[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        return asyncio.ensure_future(self._sink.append(entries))

    @staticmethod
    async def _settle(writes: list[asyncio.Future[list[AuditRow]]]) -> None:
        """Wait for every write of the turn; re-raise the first failure (after all finished)."""
        for outcome in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome


AuditLog.__module__ = "middleware"
