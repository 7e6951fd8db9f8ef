"""Audit rows and their hash chain: what `AuditLog` writes and what ``sink.verify()`` checks.

Every row carries the hash of the row before it (``prev_hash``; the first row carries
`GENESIS_HASH`) and its own ``hash``: the lowercase hex SHA-256 of the canonical JSON
(``pipeline.canonical_json``) of its index, its entry's fields and ``prev_hash``; the fields
``ran`` and ``decisions`` count only when set (`OPTIONAL_FIELDS`), so rows written before they
existed verify as they always did. Editing a row breaks its own hash; deleting, inserting or
reordering rows breaks the index or ``prev_hash`` of the first row out of place. A sink also
keeps a head (row count and last hash) so that removing rows from the end is detected too; keep
a copy of ``sink.head()`` elsewhere to detect a rewrite of the whole tail.

With a key (`AuditKey`, ``middleware/audit/_key.py``) the ``hash`` is instead the keyed form
of the same text (``"hmac-sha256:<key id>:<hex>"``), so only the key's holder can chain rows;
the unkeyed form above is unchanged. Sealing rows (their text written directly, their hash)
lives in ``middleware/audit/_seal.py``, `verify_rows` in ``middleware/audit/_verify.py``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias, get_args, runtime_checkable

from pipeline import canonical_json
from pipeline.calls import ToolDecisionAction, Verdict
from pipeline.stores import TransactionWriter

from ._report import AuditVerification

__all__ = [
    "DECISIONS", "FREE_TEXT_FIELDS", "GENESIS_HASH", "KINDS", "OPTIONAL_FIELDS", "STATUSES",
    "AuditDecision", "AuditEntry", "AuditHead", "AuditKind", "AuditRow", "AuditSink",
    "JointAuditSink", "entry_from_fields", "entry_to_fields", "hashed_fields", "row_hash",
]

AuditDecision: TypeAlias = Verdict | ToolDecisionAction
"""What a row's ``decision`` says: a call's verdict (``pipeline.calls.Verdict``: ``allowed``
through ``not_run``) on call rows, or what was decided about a tool (``hidden``,
``withdrawn``) on ``tool`` rows."""

DECISIONS: tuple[AuditDecision, ...] = (*get_args(Verdict), *get_args(ToolDecisionAction))
"""Every word a row's ``decision`` may hold: the call verdicts, then the tool decisions. (Logs
written before the verdicts kept ``hidden`` on call rows too; they still read and verify.)"""

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first row."""

TurnStatus = Literal["completed", "failed", "aborted"]

AuditKind = Literal[
    "tool_call", "amended", "deleted", "tool", "turn", "repair", "access", "answer"
]
"""What a row records (see `AuditEntry.kind`)."""

KINDS: tuple[AuditKind, ...] = (
    "tool_call", "amended", "deleted", "tool", "turn", "repair", "access", "answer"
)
"""Every ``kind`` a row may hold (see `AuditEntry.kind`)."""
STATUSES: tuple[TurnStatus, ...] = ("completed", "failed", "aborted")
"""Every ``status`` a turn row may hold."""


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class AuditEntry:
    """What one audit row records: a call, a change to one, a tool decision, a turn, a repair.

    A call gets exactly one ``tool_call`` row, written once from its stored record; nothing
    rewrites it. Changes made later are rows of their own kinds, so counting ``tool_call``
    rows counts calls (a durable turn re-run after a crash stores its calls again and writes
    the same rows again: count distinct call ids there).

    Example (the row of a call a policy refused; ``ran`` is False, the decision is the
    record's verdict and its deciding decision's policy and reason)::

        AuditEntry(kind="tool_call", turn_id="turn_…", conversation_id=None,
                   recorded_at=…, call_id="c1", tool="shell", checksum="…",
                   args='{"cmd":"ls"}', is_error=True, duration_ms=None,
                   decision="denied", policy="loopware.policy",
                   reason="matches deny pattern shell*", ran=False,
                   decisions='[{"action":"denied","policy":"loopware.policy",'
                             '"reason":"matches deny pattern shell*","when":"before"}]')
    """

    kind: AuditKind
    """What the row records:

    - ``"tool_call"``: a stored call, from its record: ``decision`` is its verdict
      (``ToolCall.verdict``), ``policy`` and ``reason`` those of the decision the verdict comes
      from (None when none), ``ran`` whether the handler ran, ``decisions`` every decision
      taken about it, ``duration_ms`` how long the handler ran. One row per call.
    - ``"amended"``: a stored call replaced by ``mutate_tool_call``: the new form, with the
      same fields as a ``tool_call`` row (the call's ``tool_call`` row stays as it was).
    - ``"deleted"``: a stored call removed by ``delete_tool_call``: ``call_id``, ``tool``,
      ``checksum`` and ``args`` of the record that was removed.
    - ``"tool"``: a decision about a tool for the rest of the turn (``ToolDecided``):
      ``tool``, ``decision`` (``"hidden"`` or ``"withdrawn"``), ``policy``, ``reason``, and
      ``call_id`` of the call that led to it (None when none did). Never part of that call's
      row.
    - ``"turn"``: a finished turn.
    - ``"repair"``: a sink cut a torn tail left by a killed writer (``args`` says where and how
      much, ``checksum`` is the SHA-256 of the cut bytes, ``turn_id`` is empty).
    - ``"access"``: a request refused before any turn saw it (the gateway's HTTP door: no
      token, a wrong or expired one): ``decision`` ``"denied"``, ``policy`` who refused,
      ``reason`` why, ``args`` the request as canonical JSON (method, path, peer; never a
      credential), ``turn_id`` empty, ``is_error`` True.
    - ``"answer"``: a gate answered from outside its turn (``loopware console``: a durable
      gate, or the MCP gateway's approval through its webhook): ``turn_id`` the waiting turn,
      ``call_id``, ``tool`` and ``args`` those of the call the gate holds (the validated
      arguments the handler receives), ``decision`` ``"approved"`` or ``"rejected"``,
      ``policy`` who answered (``console:<name>``), ``reason`` the reason given, ``checksum``
      the gate's id (durable, or the gateway's); ``conversation_id`` the gateway turn's (None
      for a durable gate). The call's own row follows when its turn stores it.
    """
    turn_id: str
    """The turn (empty for repair and access rows)."""
    conversation_id: str | None
    """The turn's conversation, if any."""
    recorded_at: datetime
    """When the row was made: the call stored, amended or deleted, the tool decided, the turn
    ended or the repair made (timezone-aware)."""
    call_id: str | None = None
    """The call's id (call rows; on a ``tool`` row, the call that led to the decision)."""
    tool: str | None = None
    """The tool's name (call and ``tool`` rows)."""
    checksum: str | None = None
    """The call's checksum (call rows)."""
    args: str | None = None
    """The call's arguments as canonical JSON (call rows)."""
    is_error: bool = False
    """The call's record is an error; for a turn row, the turn failed."""
    duration_ms: float | None = None
    """How long the handler ran (call rows: the record's ``duration_ms``, None when it did not
    run), or the turn lasted."""
    decision: AuditDecision | None = None
    """Call rows: the call's verdict; ``tool`` rows: ``"hidden"`` or ``"withdrawn"``."""
    policy: str | None = None
    """Who took the decision the row's ``decision`` comes from, if anybody did."""
    reason: str | None = None
    """Why, as that policy put it."""
    status: TurnStatus | None = None
    """How the turn ended (turn rows)."""
    error: str | None = None
    """The error that failed the turn, as ``"CODE: message"`` (turn rows)."""
    input: str | None = None
    """The user input (turn rows)."""
    ran: bool | None = None
    """Whether the handler ran (``tool_call`` and ``amended`` rows); None on other rows and on
    rows written before the field existed."""
    decisions: str | None = None
    """Every decision taken about the call, in order, as the canonical JSON text of a list of
    ``Decision.as_dict()`` (``tool_call`` and ``amended`` rows; ``"[]"`` when none was taken);
    None on other rows and on rows written before the field existed."""

    def __init__(
        self, *, kind: AuditKind, turn_id: str, conversation_id: str | None,
        recorded_at: datetime, call_id: str | None = None, tool: str | None = None,
        checksum: str | None = None, args: str | None = None, is_error: bool = False,
        duration_ms: float | None = None, decision: AuditDecision | None = None,
        policy: str | None = None, reason: str | None = None, status: TurnStatus | None = None,
        error: str | None = None, input: str | None = None, ran: bool | None = None,
        decisions: str | None = None,
    ) -> None:  # fmt: skip
        """Set the fields: a row is built per call, so each slot is set by its own setter."""
        (s_kind, s_turn, s_conv, s_at, s_call, s_tool, s_sum, s_args, s_err, s_ms, s_dec,
         s_pol, s_why, s_status, s_error, s_input, s_ran, s_decs) = _ENTRY_SETTERS  # fmt: skip
        s_kind(self, kind)
        s_turn(self, turn_id)
        s_conv(self, conversation_id)
        s_at(self, recorded_at)
        s_call(self, call_id)
        s_tool(self, tool)
        s_sum(self, checksum)
        s_args(self, args)
        s_err(self, is_error)
        s_ms(self, duration_ms)
        s_dec(self, decision)
        s_pol(self, policy)
        s_why(self, reason)
        s_status(self, status)
        s_error(self, error)
        s_input(self, input)
        s_ran(self, ran)
        s_decs(self, decisions)


_ENTRY_SETTERS = tuple(  # the slots' own setters, in `AuditEntry.__init__`'s order
    AuditEntry.__dict__[name].__set__
    for name in ("kind", "turn_id", "conversation_id", "recorded_at", "call_id", "tool",
                 "checksum", "args", "is_error", "duration_ms", "decision", "policy", "reason",
                 "status", "error", "input", "ran", "decisions")
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditHead:
    """The end of a chain: how many rows it has and the last row's hash."""

    count: int
    """The number of rows."""
    hash: str
    """The last row's hash (`GENESIS_HASH` when empty)."""


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One row of an audit chain."""

    index: int
    """0-based position in the chain."""
    entry: AuditEntry
    """What the row records."""
    prev_hash: str
    """The previous row's hash (`GENESIS_HASH` for the first row)."""
    hash: str
    """This row's hash."""


class AuditSink(Protocol):
    """Where `AuditLog` appends rows. One chain per sink; appends are serialised."""

    def append(self, entries: Sequence[AuditEntry]) -> Awaitable[list[AuditRow]]:
        """Queue ``entries`` as the next rows (call order is chain order); await durability.

        Must be called from a running event loop; the rows are chained in the order of the
        ``append`` calls, and the awaitable completes once they are written.
        """
        ...

    def rows(self) -> list[AuditRow]:
        """Return every row, in chain order."""
        ...

    def head(self) -> AuditHead:
        """Return the chain's head as written so far."""
        ...

    def verify(self, *, head: AuditHead | None = None) -> AuditVerification:
        """Check the chain (against ``head`` when given); see `AuditVerification`.

        The report is truthy when the chain holds, else it names the first bad row and why.
        """
        ...

    def close(self) -> None:
        """Finish queued appends and release the storage."""
        ...


@runtime_checkable
class JointAuditSink(AuditSink, Protocol):
    """A sink that can also write rows inside a store's transaction on the same database.

    `AuditLog` writes a call's row this way when the turn's store is a
    ``pipeline.stores.JointStore`` whose ``transaction_database`` is the sink's ``database``.
    """

    @property
    def database(self) -> str | None:
        """The database the rows go to, named as stores name theirs (None: no store's)."""
        ...

    def joint(self, entries: Sequence[AuditEntry]) -> TransactionWriter:
        """``entries`` as the next rows, written by the store in its transaction."""
        ...


def entry_to_fields(entry: AuditEntry) -> dict[str, Any]:
    """Return the entry's fields as plain data (``recorded_at`` in ISO 8601), every field."""
    return {
        "kind": entry.kind,
        "turn_id": entry.turn_id,
        "conversation_id": entry.conversation_id,
        "recorded_at": entry.recorded_at.isoformat(),
        "call_id": entry.call_id,
        "tool": entry.tool,
        "checksum": entry.checksum,
        "args": entry.args,
        "is_error": entry.is_error,
        "duration_ms": entry.duration_ms,
        "decision": entry.decision,
        "policy": entry.policy,
        "reason": entry.reason,
        "status": entry.status,
        "error": entry.error,
        "input": entry.input,
        "ran": entry.ran,
        "decisions": entry.decisions,
    }


OPTIONAL_FIELDS = ("ran", "decisions")
"""Fields a row's hash covers only when they are set: rows written before they existed (and
rows of kinds that never set them) hash as they always did."""


def hashed_fields(entry: AuditEntry) -> dict[str, Any]:
    """The fields a row's hash is taken of: `entry_to_fields` without the unset optional ones."""
    fields = entry_to_fields(entry)
    for name in OPTIONAL_FIELDS:
        if fields[name] is None:
            del fields[name]
    return fields


_TEXT_FIELDS = ("turn_id",)
_OPTIONAL_TEXT_FIELDS = (
    "conversation_id",
    "call_id",
    "tool",
    "checksum",
    "args",
    "policy",
    "reason",
    "error",
    "input",
    "decisions",
)
FREE_TEXT_FIELDS: frozenset[str] = frozenset((*_TEXT_FIELDS, *_OPTIONAL_TEXT_FIELDS))
"""The fields holding text of any kind (a model's, a tool's): what a sink stores with care."""


def entry_from_fields(fields: Mapping[str, Any]) -> AuditEntry:
    """Re-create an entry from `entry_to_fields` output (the optional fields may be absent).

    Raises:
        ValueError: a field is missing or has the wrong type (a corrupt or forged row).
    """
    for name in _TEXT_FIELDS:
        if not isinstance(fields.get(name), str):
            raise ValueError(f"audit field {name!r} must be text")
    for name in _OPTIONAL_TEXT_FIELDS:
        if fields.get(name) is not None and not isinstance(fields[name], str):
            raise ValueError(f"audit field {name!r} must be text or null")
    kind, decision, status = fields.get("kind"), fields.get("decision"), fields.get("status")
    if kind not in KINDS:
        raise ValueError(f"audit field 'kind' is {kind!r}")
    if decision is not None and decision not in DECISIONS:
        raise ValueError(f"audit field 'decision' is {decision!r}")
    if status is not None and status not in STATUSES:
        raise ValueError(f"audit field 'status' is {status!r}")
    if not isinstance(fields.get("is_error"), bool):
        raise ValueError("audit field 'is_error' must be a boolean")
    ran = fields.get("ran")
    if ran is not None and not isinstance(ran, bool):
        raise ValueError("audit field 'ran' must be a boolean or null")
    duration = fields.get("duration_ms")
    if duration is not None and (
        isinstance(duration, bool)
        or not isinstance(duration, int | float)
        or not math.isfinite(duration)
    ):
        raise ValueError("audit field 'duration_ms' must be a finite number or null")
    recorded = fields.get("recorded_at")
    if not isinstance(recorded, str):
        raise ValueError("audit field 'recorded_at' must be text")
    return AuditEntry(
        kind=kind,
        turn_id=fields["turn_id"],
        conversation_id=fields.get("conversation_id"),
        recorded_at=datetime.fromisoformat(recorded),
        call_id=fields.get("call_id"),
        tool=fields.get("tool"),
        checksum=fields.get("checksum"),
        args=fields.get("args"),
        is_error=fields["is_error"],
        duration_ms=None if duration is None else float(duration),
        decision=decision,
        policy=fields.get("policy"),
        reason=fields.get("reason"),
        status=status,
        error=fields.get("error"),
        input=fields.get("input"),
        ran=ran,
        decisions=fields.get("decisions"),
    )


def row_hash(index: int, fields: Mapping[str, Any], prev_hash: str) -> str:
    """Return a row's hash from its index, hashed fields (`hashed_fields`) and previous hash."""
    text = canonical_json({**fields, "index": index, "prev_hash": prev_hash})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


for _cls in (AuditEntry, AuditHead, AuditRow, AuditSink):
    _cls.__module__ = "middleware.audit"
