"""Audit rows and their hash chain: what `AuditLog` writes and what ``sink.verify()`` checks.

Every row carries the hash of the row before it (``prev_hash``; the first row carries
`GENESIS_HASH`) and its own ``hash``: the lowercase hex SHA-256 of the canonical JSON
(``pipeline.canonical_json``) of its index, its entry's fields and ``prev_hash``. Editing a row
breaks its own hash; deleting, inserting or reordering rows breaks the index or ``prev_hash`` of
the first row out of place. A sink also keeps a head (row count and last hash) so that removing
rows from the end is detected too; keep a copy of ``sink.head()`` elsewhere to detect a rewrite
of the whole tail.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from json.encoder import encode_basestring
from typing import Any, Literal, Protocol

from pipeline import canonical_json

__all__ = [
    "DECISIONS",
    "GENESIS_HASH",
    "AuditDecision",
    "AuditEntry",
    "AuditHead",
    "AuditKind",
    "AuditRow",
    "AuditSink",
    "canonical_row",
    "entry_from_fields",
    "entry_to_fields",
    "iso_text",
    "new_head",
    "new_row",
    "row_hash",
    "seal",
    "seal_fields",
    "verify_rows",
]

AuditDecision = Literal["allowed", "warned", "approved", "hidden", "denied", "rejected"]
"""What policy middleware decided about a call (``allowed`` when none said anything)."""

DECISIONS: tuple[AuditDecision, ...] = (
    "allowed",
    "warned",
    "approved",
    "hidden",
    "denied",
    "rejected",
)
"""Every decision, weakest first: when several apply to one call, the last in this order wins."""

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first row."""

TurnStatus = Literal["completed", "failed", "aborted"]

AuditKind = Literal["tool_call", "turn", "repair"]
"""What a row records (see `AuditEntry.kind`)."""

_KINDS = ("tool_call", "turn", "repair")
_STATUSES = ("completed", "failed", "aborted")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """What one audit row records: a tool call, a finished turn, or a sink's repair."""

    kind: AuditKind
    """``"tool_call"``: a call as stored, with the decision known then; a call gets another
    row when it is stored again (mutated) or a later decision changes its decision, so the
    **last** row of a call id is its final form. ``"turn"``: a finished turn. ``"repair"``: a
    sink cut a torn tail left by a killed writer (``args`` says where and how much,
    ``checksum`` is the SHA-256 of the cut bytes, ``turn_id`` is empty)."""
    turn_id: str
    """The turn (empty for repair rows)."""
    conversation_id: str | None
    """The turn's conversation, if any."""
    recorded_at: datetime
    """When the call was stored or decided, the turn ended or the repair was made (aware)."""
    call_id: str | None = None
    """The call's id (tool call rows)."""
    tool: str | None = None
    """The tool's name (tool call rows)."""
    checksum: str | None = None
    """The call's checksum (tool call rows)."""
    args: str | None = None
    """The call's arguments as canonical JSON (tool call rows)."""
    is_error: bool = False
    """The call failed; for a turn row, the turn failed."""
    duration_ms: float | None = None
    """How long the handler ran (tool call rows), or the turn lasted; None when unknown."""
    decision: AuditDecision | None = None
    """What policy middleware decided about the call (tool call rows)."""
    policy: str | None = None
    """The policy (middleware namespace) that took that decision, if any."""
    reason: str | None = None
    """Why, as the policy put it."""
    status: TurnStatus | None = None
    """How the turn ended (turn rows)."""
    error: str | None = None
    """The error that failed the turn, as ``"CODE: message"`` (turn rows)."""
    input: str | None = None
    """The user input (turn rows)."""


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

    def verify(self, *, head: AuditHead | None = None) -> int | None:
        """Return None when the chain is intact, else the 0-based index of the first bad row."""
        ...

    def close(self) -> None:
        """Finish queued appends and release the storage."""
        ...


def entry_to_fields(entry: AuditEntry) -> dict[str, Any]:
    """Return the entry's fields as plain data (``recorded_at`` in ISO 8601)."""
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
    }


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
)


def entry_from_fields(fields: Mapping[str, Any]) -> AuditEntry:
    """Re-create an entry from `entry_to_fields` output.

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
    if kind not in _KINDS:
        raise ValueError(f"audit field 'kind' is {kind!r}")
    if decision is not None and decision not in DECISIONS:
        raise ValueError(f"audit field 'decision' is {decision!r}")
    if status is not None and status not in _STATUSES:
        raise ValueError(f"audit field 'status' is {status!r}")
    if not isinstance(fields.get("is_error"), bool):
        raise ValueError("audit field 'is_error' must be a boolean")
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
    )


def row_hash(index: int, fields: Mapping[str, Any], prev_hash: str) -> str:
    """Return the hash of a row from its index, entry fields and previous hash."""
    text = canonical_json({**fields, "index": index, "prev_hash": prev_hash})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_SECOND = timedelta(seconds=1)
_NEVER = datetime.min
_last_second: list[tuple[datetime, object, str, str]] = [(_NEVER, _NEVER, "", "")]
"""The second `iso_text` formatted last (microsecond 0), its ``tzinfo`` and its text before and
after the fraction: one tuple, replaced whole, so that the calling thread and a sink's writer
thread may share it."""


def iso_text(at: datetime) -> str:
    """Return ``at.isoformat()``, in half the time when the previous call was in the same second.

    Rows recorded within one second share the text up to the second and the offset (for a
    plain `datetime` with a fixed offset or none), so only the fraction is formatted; anything
    else (a subclass, a ``zoneinfo`` zone) calls ``isoformat``.
    """
    tz = at.tzinfo
    if type(at) is not datetime or not (tz is None or type(tz) is timezone):
        return at.isoformat()
    second, zone, head, tail = _last_second[0]
    # With the same tzinfo object (or both naive) the difference ignores the offset.
    if tz is not zone or not (_ZERO <= at - second < _SECOND):
        second = at.replace(microsecond=0)
        text = second.isoformat()  # "YYYY-MM-DDTHH:MM:SS" + the offset, if any
        head, tail = text[:19], text[19:]
        _last_second[0] = (second, tz, head, tail)
    micro = at.microsecond
    return f"{head}.{micro:06d}{tail}" if micro else head + tail


_ZERO = timedelta(0)
_MAX_SAFE_INTEGER = 2**53 - 1
_QUOTED = {
    text: encode_basestring(text) for text in (*DECISIONS, *_KINDS, *_STATUSES)
}
"""The JSON text of every ``kind``, ``decision`` and ``status``: looked up, not escaped."""
_quoted = _QUOTED.get


def canonical_row(
    entry: AuditEntry, index: int, prev_hash: str, recorded_at: str | None = None
) -> bytes:
    """Return the UTF-8 canonical JSON that a row's hash is taken of, built once.

    ``recorded_at``: ``iso_text(entry.recorded_at)`` when the caller has it already.

    Byte for byte ``canonical_json({**entry_to_fields(entry), "index": index, "prev_hash":
    prev_hash})`` (the definition in the module docstring): strings go through the stdlib's
    C string encoder, whose escapes are canonical JSON's for every string without a lone
    surrogate; a row with anything else (a surrogate, an unusual type) is built the slow way.
    """
    q = encode_basestring
    e = entry
    try:
        if type(index) is not int or not 0 <= index <= _MAX_SAFE_INTEGER:
            raise TypeError(index)
        a, c, k, v, d = e.args, e.call_id, e.checksum, e.conversation_id, e.decision
        r, i, p, o, s, t = e.error, e.input, e.policy, e.reason, e.status, e.tool
        n = e.duration_ms
        b: object = e.is_error  # typed bool; the text matches the definition whatever it holds
        if n is None:
            m = "null"
        elif type(n) is float and 1e-4 <= abs(n) < 1e16 and not n.is_integer():
            m = float.__repr__(n)  # JavaScript's text for these (pipeline/_json.py)
        else:
            m = canonical_json(n)
        text = (
            f'{{"args":{"null" if a is None else q(a)}'
            f',"call_id":{"null" if c is None else q(c)}'
            f',"checksum":{"null" if k is None else q(k)}'
            f',"conversation_id":{"null" if v is None else q(v)}'
            f',"decision":{"null" if d is None else _quoted(d) or q(d)}'
            f',"duration_ms":{m}'
            f',"error":{"null" if r is None else q(r)}'
            f',"index":{int.__repr__(index)}'
            f',"input":{"null" if i is None else q(i)}'
            f',"is_error":{"true" if b is True else "false" if b is False else canonical_json(b)}'
            f',"kind":{_quoted(e.kind) or q(e.kind)}'
            f',"policy":{"null" if p is None else q(p)}'
            f',"prev_hash":{q(prev_hash)}'
            f',"reason":{"null" if o is None else q(o)}'
            f',"recorded_at":{q(iso_text(e.recorded_at) if recorded_at is None else recorded_at)}'
            f',"status":{"null" if s is None else _quoted(s) or q(s)}'
            f',"tool":{"null" if t is None else q(t)}'
            f',"turn_id":{q(e.turn_id)}}}'
        )
        return text.encode()  # a lone surrogate cannot be encoded: the slow way
    except (TypeError, UnicodeEncodeError):
        fields = {**entry_to_fields(entry), "index": index, "prev_hash": prev_hash}
        return canonical_json(fields).encode("utf-8")


_make = object.__new__
_set_index, _set_entry, _set_prev, _set_hash = (
    AuditRow.__dict__[name].__set__ for name in ("index", "entry", "prev_hash", "hash")
)


def new_row(index: int, entry: AuditEntry, prev_hash: str, digest: str) -> AuditRow:
    """``AuditRow(index, entry, prev_hash, digest)`` for a sink's new rows, in half the time.

    It fills the slots directly instead of through the frozen dataclass's ``__init__`` (four
    ``object.__setattr__`` calls); the row is the same, equal to one built by ``AuditRow``.
    """
    row: AuditRow = _make(AuditRow)
    _set_index(row, index)
    _set_entry(row, entry)
    _set_prev(row, prev_hash)
    _set_hash(row, digest)
    return row


_set_count, _set_head_hash = (AuditHead.__dict__[name].__set__ for name in ("count", "hash"))


def new_head(row: AuditRow) -> AuditHead:
    """``AuditHead(row.index + 1, row.hash)``: the head after ``row``, built as `new_row` builds."""
    head: AuditHead = _make(AuditHead)
    _set_count(head, row.index + 1)
    _set_head_hash(head, row.hash)
    return head


def seal(entries: Iterable[AuditEntry], head: AuditHead) -> list[AuditRow]:
    """Chain ``entries`` after ``head``; return the new rows (the caller writes them)."""
    rows: list[AuditRow] = []
    index, prev = head.count, head.hash
    sha256 = hashlib.sha256
    for entry in entries:
        digest = sha256(canonical_row(entry, index, prev)).hexdigest()
        rows.append(new_row(index, entry, prev, digest))
        index, prev = index + 1, digest
    return rows


def seal_fields(
    entries: Iterable[AuditEntry], head: AuditHead
) -> tuple[list[AuditRow], list[tuple[Any, ...]], int, bool]:
    """`seal`, also returning each new row's stored values, every field read once.

    Returns the rows; per row ``(index, *fields, prev_hash, hash)`` with the fields in
    `entry_to_fields` order, ``recorded_at`` as `iso_text` and ``is_error`` as 0 or 1; the total
    size of their hash texts (about what they take in storage); and whether every text was
    ASCII. The hash text is `canonical_row`'s, built inline for the common row (a float
    duration in the range whose text is ``float.__repr__``, or none; a boolean ``is_error``; a
    safe index) and by `canonical_row` for any other.
    """
    q = encode_basestring
    quoted = _quoted
    sha256 = hashlib.sha256
    rows: list[AuditRow] = []
    values: list[tuple[Any, ...]] = []
    size = 0
    ascii_only = True
    index, prev = head.count, head.hash
    escaped_prev = q(prev)[1:-1]  # then each row's own digest: hex, nothing to escape
    for e in entries:
        a, c, k, v, d = e.args, e.call_id, e.checksum, e.conversation_id, e.decision
        r, i, p, o, s, t = e.error, e.input, e.policy, e.reason, e.status, e.tool
        n, kind, turn = e.duration_ms, e.kind, e.turn_id
        b: Any = e.is_error  # typed bool; anything else takes canonical_row's way
        at = e.recorded_at
        recorded = iso_text(at)
        data: bytes | None = None
        if (
            type(b) is bool
            and (n is None or (type(n) is float and 1e-4 <= abs(n) < 1e16 and not n.is_integer()))
            and type(index) is int
            and 0 <= index <= _MAX_SAFE_INTEGER
        ):
            try:  # the text of canonical_row, whose docstring says why it is canonical JSON
                # A datetime's own isoformat is digits and "-:T.+": nothing to escape.
                escaped_at = recorded if type(at) is datetime else q(recorded)[1:-1]
                data = (
                    f'{{"args":{"null" if a is None else q(a)}'
                    f',"call_id":{"null" if c is None else q(c)}'
                    f',"checksum":{"null" if k is None else q(k)}'
                    f',"conversation_id":{"null" if v is None else q(v)}'
                    f',"decision":{"null" if d is None else quoted(d) or q(d)}'
                    f',"duration_ms":{"null" if n is None else float.__repr__(n)}'
                    f',"error":{"null" if r is None else q(r)}'
                    f',"index":{int.__repr__(index)}'
                    f',"input":{"null" if i is None else q(i)}'
                    f',"is_error":{"true" if b else "false"}'
                    f',"kind":{quoted(kind) or q(kind)}'
                    f',"policy":{"null" if p is None else q(p)}'
                    f',"prev_hash":"{escaped_prev}"'
                    f',"reason":{"null" if o is None else q(o)}'
                    f',"recorded_at":"{escaped_at}"'
                    f',"status":{"null" if s is None else quoted(s) or q(s)}'
                    f',"tool":{"null" if t is None else q(t)}'
                    f',"turn_id":{q(turn)}}}'
                ).encode()
            except (TypeError, UnicodeEncodeError):
                data = None
        if data is None:
            data = canonical_row(e, index, prev, recorded)
        size += len(data)
        ascii_only = ascii_only and data.isascii()
        digest = sha256(data).hexdigest()
        rows.append(new_row(index, e, prev, digest))
        values.append(
            (index, kind, turn, v, recorded, c, t, k, a, int(b), n, d, p, o, s, r, i, prev, digest)
        )
        index, prev, escaped_prev = index + 1, digest, digest
    return rows, values, size, ascii_only


def verify_rows(rows: Iterable[AuditRow | None], head: AuditHead | None) -> int | None:
    """Check a chain read back from storage; ``None`` items are rows that did not parse.

    Returns None when every row is in place and unedited and the chain reaches ``head``;
    otherwise the index of the first row that is not (``count`` of rows when rows are missing
    from the end).
    """
    prev = GENESIS_HASH
    count = 0
    anchor = -1 if head is None else head.count - 1  # the row whose hash the head records
    anchored = GENESIS_HASH
    for i, row in enumerate(rows):
        if (
            row is None
            or row.index != i
            or row.prev_hash != prev
            or hashlib.sha256(canonical_row(row.entry, i, prev)).hexdigest() != row.hash
        ):
            return i
        if i == anchor:
            anchored = row.hash
        prev = row.hash
        count = i + 1
    if head is not None and head.count > 0:
        if head.count > count:
            return count
        if anchored != head.hash:
            return anchor
    return None


for _cls in (AuditEntry, AuditHead, AuditRow, AuditSink):
    _cls.__module__ = "middleware"
