"""`AuditLog`: one tamper-evident row per stored tool call, written once, from the stored record.

`AuditLog` is two things to the runner it is handed to (``TurnRunner(middleware=[...])``), and
neither is a stage middleware, so no middleware can skip it by short-circuiting a stage:

- a **record keeper** (``pipeline.stages.RecordKeeper``): the turn hands it every change to
  its stored calls, and the row is written with the store's write. A call's row
  (``kind="tool_call"``) is built from the record the store keeps: its verdict
  (``ToolCall.verdict``) as ``decision``, the deciding decision's ``policy`` and ``reason``,
  ``ran``, every decision (``decisions``), ``duration_ms``. With a durable store the row is
  durable before ``store_tool_call`` returns: in the store's own transaction when the sink
  writes to the store's database (``SqliteStore`` and ``SqliteAuditSink`` on one file,
  ``PostgresStore`` and ``PostgresAuditSink`` on one database), else written (and awaited)
  before the store's write. With a store that keeps nothing past the process (`MemoryStore`)
  it is appended at once and awaited when the turn ends. A call replaced by
  ``mutate_tool_call`` gets an ``"amended"`` row with its new form, one removed by
  ``delete_tool_call`` a ``"deleted"`` row; the call's ``tool_call`` row is never written
  again.
- an **event observer**: ``TurnStart`` (the turn's input and conversation), ``ToolDecided``
  (a ``kind="tool"`` row: a tool hidden or withdrawn, with the call that led to it) and
  ``TurnEnd`` (the turn's row). These rows are appended at once; the ``TurnEnd`` listener
  returns an awaitable that the runner awaits before ``run()`` returns, so they are written by
  then.

So counting ``tool_call`` rows counts stored calls, and a call's row says what its record says.
(A durable turn re-run after a crash stores its calls again, idempotently, and so writes their
rows again: the same decision, ``ran`` and arguments with a later ``recorded_at``, and the
replay's ``duration_ms``; count distinct call ids there.)
Every row is chained to the previous one by its hash (see ``sink.verify()``). Appends of
concurrent turns go to the sink in the order they are made and form one chain per sink.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime

from pipeline import canonical_json
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.events import ToolDecided, TurnEnd, TurnStart
from pipeline.stages import EventSource, RecordChange
from pipeline.stores import TransactionWriter

from ._chain import AuditEntry, AuditRow, AuditSink, JointAuditSink
from ._sqlite import SqliteAuditSink

__all__ = ["DEFAULT_AUDIT_PATH", "AuditLog", "change_entry"]

DEFAULT_AUDIT_PATH = "loopware-audit.sqlite"
"""Where ``AuditLog()`` without a sink writes: this file in the current directory."""


class _TurnAudit:
    """What the log has collected about one in-flight turn."""

    __slots__ = ("conversation_id", "input", "prune_at", "writes")

    def __init__(self, conversation_id: str | None, input: str | None) -> None:
        self.conversation_id = conversation_id
        self.input = input
        self.writes: list[asyncio.Future[list[AuditRow]]] = []
        """The turn's tool and turn row appends that are running or failed."""
        self.prune_at = _PRUNE_FLOOR
        """Drop finished appends from ``writes`` when it grows past this."""

    def track(self, write: asyncio.Future[list[AuditRow]]) -> None:
        """Keep ``write`` until the turn ends; drop the appends that finished well by then.

        A long turn (a gateway session's) would otherwise hold every row it wrote. The list is
        filtered when it doubles, so each append costs O(1) amortised; failures stay, for
        `AuditLog` to report at the turn's end.
        """
        writes = self.writes
        writes.append(write)
        if len(writes) > self.prune_at:
            writes[:] = [w for w in writes if not w.done() or w.cancelled() or w.exception()]
            self.prune_at = 2 * len(writes) + _PRUNE_FLOOR


_PRUNE_FLOOR = 64
_NO_DECISIONS = "[]"


def change_entry(change: RecordChange, at: datetime | None = None) -> AuditEntry:
    """The row of a change to a turn's stored calls (see `AuditEntry.kind`).

    ``"stored"`` is a ``tool_call`` row and ``"amended"`` an ``amended`` row, both from the
    record as stored; ``"deleted"`` a ``deleted`` row naming the record removed.
    """
    call = change.call
    when = datetime.now(UTC) if at is None else at
    if change.action == "deleted":
        return AuditEntry(
            kind="deleted",
            turn_id=change.turn_id,
            conversation_id=change.conversation_id,
            recorded_at=when,
            call_id=call.id,
            tool=call.tool,
            checksum=call.checksum,
            args=canonical_json(call.args),
            is_error=call.is_error,
        )
    decisions = call.decisions
    deciding = call.deciding if decisions else None
    return AuditEntry(
        kind="tool_call" if change.action == "stored" else "amended",
        turn_id=change.turn_id,
        conversation_id=change.conversation_id,
        recorded_at=when,
        call_id=call.id,
        tool=call.tool,
        checksum=call.checksum,
        args=canonical_json(call.args),
        is_error=call.is_error,
        duration_ms=call.duration_ms,
        decision=call.verdict,
        policy=None if deciding is None else deciding.policy,
        reason=None if deciding is None else deciding.reason,
        ran=call.ran,
        decisions=(
            canonical_json([d.as_dict() for d in decisions]) if decisions else _NO_DECISIONS
        ),
    )


class AuditLog:
    """Writes a hash-chained audit row per stored tool call, per tool decision and per turn.

    A call's row is written once, from its stored record, with the store's write (see the
    module docstring for the order and what each row holds).

    Args:
        sink: Where rows go (`SqliteAuditSink`, `JsonlAuditSink`, `PostgresAuditSink`, or
            anything implementing `AuditSink`). ``None`` opens
            ``SqliteAuditSink("loopware-audit.sqlite")`` in the current directory.

    Raises:
        InvalidMiddlewareConfigError: ``sink`` lacks ``append``, ``rows`` or ``verify``.
    """

    __slots__ = ("_joint", "_sink", "_turns")

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
        self._joint = sink if isinstance(sink, JointAuditSink) else None
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
        events.on(ToolDecided, self._on_tool_decided)
        events.on(TurnEnd, self._on_turn_end)

    def close(self) -> None:
        """Close the sink (finishing queued appends)."""
        close = getattr(self._sink, "close", None)
        if callable(close):
            close()

    # -- record keeper --------------------------------------------------------------------------
    def keep(self, change: RecordChange) -> Awaitable[list[AuditRow]]:
        """Append the row of ``change`` now; the awaitable completes once the sink wrote it."""
        return self._sink_append([change_entry(change)])

    def joins(self, database: str) -> bool:
        """True when the sink writes to ``database`` (a store's ``transaction_database``)."""
        joint = self._joint
        return joint is not None and joint.database == database

    def joint(self, change: RecordChange) -> TransactionWriter:
        """The row of ``change`` as writes for the store's transaction on the sink's database."""
        joint = self._joint
        if joint is None:  # the runner asks only when `joins` said yes
            raise TypeError(f"{self._sink!r} cannot write in a store's transaction")
        return joint.joint([change_entry(change)])

    # -- listeners ------------------------------------------------------------------------------
    def _turn(self, turn_id: str) -> _TurnAudit:
        state = self._turns.get(turn_id)
        if state is None:  # observed from the middle of a turn: record what we can
            state = self._turns[turn_id] = _TurnAudit(None, None)
        return state

    def _on_turn_start(self, event: TurnStart) -> None:
        self._turns[event.turn_id] = _TurnAudit(event.conversation_id, event.input)

    def _on_tool_decided(self, event: ToolDecided) -> None:
        state = self._turn(event.turn_id)
        decision = event.decision
        entry = AuditEntry(
            kind="tool",
            turn_id=event.turn_id,
            conversation_id=state.conversation_id,
            recorded_at=event.timestamp,
            call_id=decision.call_id,
            tool=decision.tool,
            decision=decision.action,
            policy=decision.policy,
            reason=decision.reason,
        )
        state.track(self._sink_append([entry]))

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
        state.track(self._sink_append([entry]))
        return self._settle(state.writes)

    # -- helpers --------------------------------------------------------------------------------
    def _sink_append(self, entries: list[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """The sink's append, started (the built-in sinks' is a future of the running loop)."""
        write = self._sink.append(entries)
        return write if isinstance(write, asyncio.Future) else asyncio.ensure_future(write)

    @staticmethod
    async def _settle(writes: list[asyncio.Future[list[AuditRow]]]) -> None:
        """Wait for every write of the turn; re-raise the first failure (after all finished)."""
        for outcome in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome


AuditLog.__module__ = "middleware.audit"
