"""Checking a chain read back from storage: `verify_rows` (one rule) and `verify_log` (a sink's).

`verify_rows` checks each row's place, link and hash, and that the chain reaches a head. A sink's
``verify()`` calls `verify_log` with the rows, the head stored with them and, when the caller gave
one, a head saved elsewhere, and returns its `AuditVerification`. Without a key, the stored head
is taken as it is (anyone can rewrite it with the rows). With a key, the stored head counts only
when its seal is the key's (``middleware/audit/_key.py``): a log whose stored head is missing or
unsealed has lost its end as far as the verifier can tell, and its row count is reported, as for
rows missing from the end.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._chain import GENESIS_HASH, AuditHead, AuditRow
from ._key import AuditKey, row_digest, sealed
from ._report import AuditFault, AuditVerification
from ._seal import canonical_row

__all__ = ["Finding", "report", "verify_log", "verify_rows"]

Finding = tuple[int, AuditFault]
"""The first bad row's index and why it is bad."""


def verify_rows(
    rows: Iterable[AuditRow | None], head: AuditHead | None, key: AuditKey | None = None
) -> tuple[Finding | None, int]:
    """Check a chain read back from storage; ``None`` items are rows that did not parse.

    Returns the first bad row and why (None when every row is in place, unedited (its hash is
    the one ``key``, or no key, makes) and the chain reaches ``head``), and how many rows were
    read (reading stops at the first bad row). Rows missing from the end are reported at the
    row count. With a key, a row hashed without it (or under another key) is a bad row.
    """
    prev = GENESIS_HASH
    count = 0
    anchor = -1 if head is None else head.count - 1  # the row whose hash the head records
    anchored = GENESIS_HASH
    hash_of = row_digest(key)
    for i, row in enumerate(rows):
        fault: AuditFault | None = None
        if row is None:
            fault = "E_AUDIT_ROW_MALFORMED"
        elif row.index != i:
            fault = "E_AUDIT_ROW_OUT_OF_PLACE"
        elif row.prev_hash != prev:
            fault = "E_AUDIT_ROW_UNLINKED"
        elif hash_of(canonical_row(row.entry, i, prev)) != row.hash:
            fault = "E_AUDIT_ROW_EDITED"
        if fault is not None or row is None:
            return (i, fault or "E_AUDIT_ROW_MALFORMED"), i + 1
        if i == anchor:
            anchored = row.hash
        prev = row.hash
        count = i + 1
    if head is not None and head.count > 0:
        if head.count > count:
            return (count, "E_AUDIT_ROWS_MISSING"), count
        if anchored != head.hash:
            return (anchor, "E_AUDIT_HEAD_MISMATCH"), count
    return None, count


def report(found: Finding | None, rows_checked: int) -> AuditVerification:
    """The `AuditVerification` of a finding (None: the chain holds)."""
    if found is None:
        return AuditVerification(ok=True, rows_checked=rows_checked)
    index, reason = found
    return AuditVerification(
        ok=False, rows_checked=rows_checked, first_bad_row=index, reason=reason
    )


def verify_log(
    rows: Iterable[AuditRow | None],
    stored: AuditHead | None,
    *,
    key: AuditKey | None = None,
    seal: str | None = None,
    given: AuditHead | None = None,
) -> AuditVerification:
    """A sink's ``verify()``: the rows against the stored head and, if any, a head given.

    Args:
        rows: Every row in chain order (None for a row that did not parse); read once, as a
            stream, without a key.
        stored: The head stored with the rows (None when it is missing).
        key: The sink's key (None: an unkeyed chain).
        seal: The stored head's seal (keyed logs; None when missing).
        given: A head saved elsewhere (``verify(head=...)``); without a key it replaces the
            stored one, with a key both are checked.

    Returns:
        The report: truthy when intact, else naming the first bad row (the row count when
        rows may be missing from the end) and why.
    """
    if key is None:  # read as a stream: a long log's rows are never all held at once
        return report(*verify_rows(rows, given if given is not None else stored))
    rows = list(rows)
    trusted = stored if sealed(key, stored, seal) else None
    found = [verify_rows(rows, trusted, key)[0]]
    if given is not None:
        found.append(verify_rows(rows, given, key)[0])
    empty = not rows and (stored is None or stored.count == 0)
    if trusted is None and not empty:  # nothing the key vouches for says where the log ends
        found.append((len(rows), "E_AUDIT_HEAD_MISSING"))
    first = min((f for f in found if f is not None), default=None, key=lambda f: f[0])
    return report(first, len(rows))
