"""Checking a chain read back from storage: `verify_rows` (one rule) and `verify_log` (a sink's).

`verify_rows` checks each row's place, link and hash, and that the chain reaches a head. A sink's
``verify()`` calls `verify_log` with the rows, the head stored with them and, when the caller gave
one, a head saved elsewhere. Without a key, the stored head is taken as it is (anyone can rewrite
it with the rows). With a key, the stored head counts only when its seal is the key's
(``middleware/audit/_key.py``): a log whose stored head is missing or unsealed has lost its end
as far as the verifier can tell, and its row count is reported, as for rows missing from the end.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._chain import GENESIS_HASH, AuditHead, AuditRow, canonical_row
from ._key import AuditKey, row_digest, sealed

__all__ = ["verify_log", "verify_rows"]


def verify_rows(
    rows: Iterable[AuditRow | None], head: AuditHead | None, key: AuditKey | None = None
) -> int | None:
    """Check a chain read back from storage; ``None`` items are rows that did not parse.

    Returns None when every row is in place, unedited (its hash is the one ``key``, or no key,
    makes) and the chain reaches ``head``; otherwise the index of the first row that is not
    (``count`` of rows when rows are missing from the end). With a key, a row hashed without it
    (or under another key) is a bad row.
    """
    prev = GENESIS_HASH
    count = 0
    anchor = -1 if head is None else head.count - 1  # the row whose hash the head records
    anchored = GENESIS_HASH
    hash_of = row_digest(key)
    for i, row in enumerate(rows):
        if (
            row is None
            or row.index != i
            or row.prev_hash != prev
            or hash_of(canonical_row(row.entry, i, prev)) != row.hash
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


def verify_log(
    rows: Iterable[AuditRow | None],
    stored: AuditHead | None,
    *,
    key: AuditKey | None = None,
    seal: str | None = None,
    given: AuditHead | None = None,
) -> int | None:
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
        None when intact, else the index of the first bad row (the row count when rows may be
        missing from the end).
    """
    if key is None:  # read as a stream: a long log's rows are never all held at once
        return verify_rows(rows, given if given is not None else stored)
    rows = list(rows)
    trusted = stored if sealed(key, stored, seal) else None
    found = [verify_rows(rows, trusted, key)]
    if given is not None:
        found.append(verify_rows(rows, given, key))
    empty = not rows and (stored is None or stored.count == 0)
    if trusted is None and not empty:
        found.append(len(rows))  # nothing the key vouches for says where the log ends
    return min((f for f in found if f is not None), default=None)
