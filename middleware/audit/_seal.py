"""Sealing audit rows: each row's canonical text, its hash, and the rows a sink writes.

The text a row's hash is taken of is defined in ``middleware/audit/_chain.py`` (`row_hash`:
``canonical_json`` of its hashed fields, index and previous hash); `canonical_row` writes that
text directly for the common row, byte for byte, and `seal` / `seal_fields` chain a sink's new
rows after a head (unkeyed, or keyed with an `AuditKey`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from json.encoder import encode_basestring
from typing import Any

from pipeline import canonical_json

from ._chain import (
    DECISIONS,
    KINDS,
    STATUSES,
    AuditEntry,
    AuditHead,
    AuditRow,
    hashed_fields,
)
from ._key import AuditKey, row_digest

__all__ = [
    "canonical_row",
    "iso_text",
    "new_head",
    "new_row",
    "seal",
    "seal_fields",
]

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
    text: encode_basestring(text) for text in (*DECISIONS, *KINDS, *STATUSES)
}
"""The JSON text of every ``kind``, ``decision`` and ``status``: looked up, not escaped."""
_quoted = _QUOTED.get
_FLAGS: dict[object, str] = {True: "true", False: "false"}


def canonical_row(
    entry: AuditEntry, index: int, prev_hash: str, recorded_at: str | None = None
) -> bytes:
    """Return the UTF-8 canonical JSON that a row's hash is taken of (the one implementation).

    ``recorded_at``: ``iso_text(entry.recorded_at)`` when the caller has it already.

    Byte for byte ``canonical_json({**hashed_fields(entry), "index": index, "prev_hash":
    prev_hash})`` (the definition in the module docstring). The common row is written
    directly, its keys in canonical (sorted) order: strings go through the stdlib's C string
    encoder, whose escapes are canonical JSON's for every string without a lone surrogate; a
    float duration in the range where ``float.__repr__`` is JavaScript's text is written by
    it. A row with anything else (a lone surrogate, an unusual type or number) is built by
    ``canonical_json`` from `hashed_fields`.
    """
    text = _common_row(entry, index, prev_hash, recorded_at)
    return _any_row(entry, index, prev_hash) if text is None else text


def _any_row(entry: AuditEntry, index: int, prev_hash: str) -> bytes:
    """`canonical_row`'s text of any row, by its definition."""
    fields = {**hashed_fields(entry), "index": index, "prev_hash": prev_hash}
    return canonical_json(fields).encode("utf-8")


def _common_row(
    e: AuditEntry, index: int, prev_hash: str, recorded_at: str | None
) -> bytes | None:
    """`canonical_row`'s text of a common row, written directly; None for any other row."""
    q = encode_basestring
    try:
        if type(index) is not int or not 0 <= index <= _MAX_SAFE_INTEGER:
            raise TypeError(index)
        a, c, k, v, d = e.args, e.call_id, e.checksum, e.conversation_id, e.decision
        r, i, p, o, s, t = e.error, e.input, e.policy, e.reason, e.status, e.tool
        n, ds, rn = e.duration_ms, e.decisions, e.ran
        if n is None:
            m = "null"
        elif type(n) is float and 1e-4 <= abs(n) < 1e16 and not n.is_integer():
            m = float.__repr__(n)  # JavaScript's text for these (pipeline/_json.py)
        else:
            m = canonical_json(n)
        b = _FLAGS[e.is_error]  # KeyError: not a bool (typed bool; the slow way writes it)
        dt = "" if ds is None else ',"decisions":' + q(ds)
        ra = "" if rn is None else ',"ran":' + _FLAGS[rn]
        text = (
            f'{{"args":{"null" if a is None else q(a)}'
            f',"call_id":{"null" if c is None else q(c)}'
            f',"checksum":{"null" if k is None else q(k)}'
            f',"conversation_id":{"null" if v is None else q(v)}'
            f',"decision":{"null" if d is None else _quoted(d) or q(d)}'
            f"{dt}"
            f',"duration_ms":{m}'
            f',"error":{"null" if r is None else q(r)}'
            f',"index":{int.__repr__(index)}'
            f',"input":{"null" if i is None else q(i)}'
            f',"is_error":{b}'
            f',"kind":{_quoted(e.kind) or q(e.kind)}'
            f',"policy":{"null" if p is None else q(p)}'
            f',"prev_hash":{q(prev_hash)}'
            f"{ra}"
            f',"reason":{"null" if o is None else q(o)}'
            f',"recorded_at":{q(iso_text(e.recorded_at) if recorded_at is None else recorded_at)}'
            f',"status":{"null" if s is None else _quoted(s) or q(s)}'
            f',"tool":{"null" if t is None else q(t)}'
            f',"turn_id":{q(e.turn_id)}}}'
        )
        return text.encode()  # a lone surrogate cannot be encoded: the slow way
    except (TypeError, KeyError, UnicodeEncodeError):
        return None


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


def seal(
    entries: Iterable[AuditEntry], head: AuditHead, key: AuditKey | None = None
) -> list[AuditRow]:
    """Chain ``entries`` after ``head`` (under ``key``, if any); return the new rows."""
    rows: list[AuditRow] = []
    index, prev = head.count, head.hash
    hash_of = row_digest(key)
    for entry in entries:
        digest = hash_of(canonical_row(entry, index, prev))
        rows.append(new_row(index, entry, prev, digest))
        index, prev = index + 1, digest
    return rows


def seal_fields(
    entries: Iterable[AuditEntry], head: AuditHead, key: AuditKey | None = None
) -> tuple[list[AuditRow], list[tuple[Any, ...]], int, bool]:
    """`seal`, also returning each new row's stored values, every field read once.

    Returns the rows; per row ``(index, *fields, prev_hash, hash)`` with the fields in
    `entry_to_fields` order, ``recorded_at`` as `iso_text` and ``is_error`` (and ``ran`` when
    set) as 0 or 1; the total size of their hash texts (about what they take in storage); and
    whether every row is plain: its text ASCII and built the common way, so that no field holds
    a lone surrogate or a value of an unusual type (a sink stores the values of other rows
    with care). The hash text is `canonical_row`'s.
    """
    hash_of = row_digest(key)
    rows: list[AuditRow] = []
    values: list[tuple[Any, ...]] = []
    size = 0
    ascii_only = True
    index, prev = head.count, head.hash
    for e in entries:
        recorded = iso_text(e.recorded_at)
        data = _common_row(e, index, prev, recorded)
        if data is None:  # canonical_json escapes a lone surrogate: its text may be ASCII
            data = _any_row(e, index, prev)
            ascii_only = False
        size += len(data)
        ascii_only = ascii_only and data.isascii()
        digest = hash_of(data)
        rows.append(new_row(index, e, prev, digest))
        ran = e.ran
        values.append(
            (
                index, e.kind, e.turn_id, e.conversation_id, recorded, e.call_id, e.tool,
                e.checksum, e.args, int(e.is_error), e.duration_ms, e.decision, e.policy,
                e.reason, e.status, e.error, e.input, None if ran is None else int(ran),
                e.decisions, prev, digest,
            )
        )
        index, prev = index + 1, digest
    return rows, values, size, ascii_only
