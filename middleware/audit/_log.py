"""`AuditLog`: a tamper-evident row per completed tool call and per turn (DESIGN 8.3).

`AuditLog` is an event observer, not a stage middleware: hand it to
``TurnRunner(middleware=[...])`` and it subscribes to the runner's events, so no middleware can
skip it by short-circuiting a stage. Per turn it collects, in event order:

- ``ToolExecutionEnd``: how long each handler ran (matched to calls by checksum);
- ``ToolCallStored``: the calls completed this iteration;
- ``Log`` records of kind ``"policy.decision"``: what policy middleware decided about a call,
  matched by ``call_id`` when given, else by ``checksum`` (``allowed`` when nobody decided;
  when several decisions hit one call the strongest wins, in the order of `DECISIONS`);

and appends one row per call when the iteration ends (``IterationEnd``), and one row for the
turn at ``TurnEnd``. Every row is chained to the previous one by its hash (see
``sink.verify()``). The ``TurnEnd`` listener returns an awaitable that the runner awaits before
``run()`` returns, so the turn's rows are written by then. Appends of concurrent turns go to
the sink in event order and form one chain per sink.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from typing import Any

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


class _TurnAudit:
    """What the log has collected about one in-flight turn."""

    __slots__ = (
        "by_call",
        "by_checksum",
        "calls",
        "conversation_id",
        "durations",
        "input",
        "writes",
    )

    def __init__(self, conversation_id: str | None, input: str | None) -> None:
        self.conversation_id = conversation_id
        self.input = input
        self.calls: dict[str, tuple[ToolCall, ToolCallStored, float | None]] = {}
        self.durations: dict[str, deque[float]] = {}
        self.by_call: dict[str, Decision] = {}
        self.by_checksum: dict[str, Decision] = {}
        self.writes: list[asyncio.Future[list[AuditRow]]] = []


def _stronger(old: Decision | None, new: Decision) -> Decision:
    return new if old is None or _RANK[new[0]] >= _RANK[old[0]] else old


class AuditLog:
    """Writes a hash-chained audit row per completed tool call and per turn.

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
        previous = state.calls.pop(call.id, None)  # mutated in the same iteration: keep one row
        if duration is None and previous is not None:
            duration = previous[2]
        state.calls[call.id] = (call, event, duration)

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
            state.by_call[call_id] = _stronger(state.by_call.get(call_id), decision)
        elif isinstance(checksum, str):
            state.by_checksum[checksum] = _stronger(state.by_checksum.get(checksum), decision)

    def _on_iteration_end(self, event: IterationEnd) -> None:
        state = self._turns.get(event.turn_id)
        if state is not None and state.calls:
            state.writes.append(self._sink_append(self._flush_calls(event.turn_id, state)))

    def _on_turn_end(self, event: TurnEnd) -> Awaitable[None]:
        state = self._turns.pop(event.turn_id, None) or _TurnAudit(None, None)
        entries = self._flush_calls(event.turn_id, state)
        error = event.error
        entries.append(
            AuditEntry(
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
        )
        state.writes.append(self._sink_append(entries))
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

    @staticmethod
    def _flush_calls(turn_id: str, state: _TurnAudit) -> list[AuditEntry]:
        entries: list[AuditEntry] = []
        for call, stored, duration in state.calls.values():
            decision = _stronger(
                state.by_checksum.get(call.checksum) or ("allowed", None, None),
                state.by_call.get(call.id) or ("allowed", None, None),
            )
            entries.append(
                AuditEntry(
                    kind="tool_call",
                    turn_id=turn_id,
                    conversation_id=state.conversation_id,
                    recorded_at=stored.timestamp,
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
            )
        state.calls.clear()
        state.by_call.clear()
        state.by_checksum.clear()
        return entries


AuditLog.__module__ = "middleware"
