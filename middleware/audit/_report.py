"""`AuditVerification`: what ``sink.verify()`` found, a value that is truthy when the chain holds.

A report names the first row that is not in place and why, with a stable reason code
(`AuditFault`): the codes are what ``loopware audit verify`` prints and what a monitoring job
should match on; the sentences beside them may change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = ["FAULT_TEXT", "AuditFault", "AuditVerification"]

AuditFault: TypeAlias = Literal[
    "E_AUDIT_ROW_MALFORMED",
    "E_AUDIT_ROW_OUT_OF_PLACE",
    "E_AUDIT_ROW_UNLINKED",
    "E_AUDIT_ROW_EDITED",
    "E_AUDIT_ROWS_MISSING",
    "E_AUDIT_HEAD_MISMATCH",
    "E_AUDIT_HEAD_MISSING",
]
"""Why a chain does not verify (the reason code of an `AuditVerification`):

- ``E_AUDIT_ROW_MALFORMED``: the row does not parse as a row.
- ``E_AUDIT_ROW_OUT_OF_PLACE``: the row's index is not its position (rows before it were
  deleted, or rows were inserted or reordered).
- ``E_AUDIT_ROW_UNLINKED``: the row does not carry the previous row's hash.
- ``E_AUDIT_ROW_EDITED``: the row's hash is not the hash of its content (an edited field; with a
  key, also a row hashed without the key or under another one).
- ``E_AUDIT_ROWS_MISSING``: the head counts more rows than the log holds (a cut tail); the bad
  row is the first missing one.
- ``E_AUDIT_HEAD_MISMATCH``: the row the head ends on has another hash (rows up to it were
  rewritten); the bad row is that row.
- ``E_AUDIT_HEAD_MISSING``: the stored head is missing, or with a key not sealed by it: rows may
  have been cut from the end; the bad row is the row count.
"""

FAULT_TEXT: Final[dict[AuditFault, str]] = {
    "E_AUDIT_ROW_MALFORMED": "the row does not parse",
    "E_AUDIT_ROW_OUT_OF_PLACE": "the row's index is not its position (rows deleted, inserted "
    "or reordered before it)",
    "E_AUDIT_ROW_UNLINKED": "the row does not carry the previous row's hash",
    "E_AUDIT_ROW_EDITED": "the row's hash is not the hash of its content (edited, or not made "
    "with the key)",
    "E_AUDIT_ROWS_MISSING": "the head counts more rows than the log holds (rows cut from the end)",
    "E_AUDIT_HEAD_MISMATCH": "the row the head ends on has another hash (rows rewritten)",
    "E_AUDIT_HEAD_MISSING": "the stored head is missing or not sealed by the key (the end may "
    "have been cut)",
}
"""One sentence per `AuditFault`: what `AuditVerification.explain` says."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditVerification:
    """What ``sink.verify()`` found: truthy when the chain holds, falsy with the first bad row.

    ``if sink.verify():`` reads as it should; ``report.first_bad_row`` and ``report.reason``
    say where and why it does not.

    Example::

        report = sink.verify()
        if not report:
            print(report.explain())  # "row 3: E_AUDIT_ROW_EDITED: the row's hash is not ..."
    """

    ok: bool
    """True when every row is in place and unedited and the chain reaches its head."""
    rows_checked: int
    """How many rows were read and checked (a log without a key is read as a stream, which
    stops at the first bad row)."""
    first_bad_row: int | None = None
    """The 0-based index of the first row that is not in place (the row count when rows may be
    missing from the end); None when ``ok``."""
    reason: AuditFault | None = None
    """Why that row is bad (a stable code); None when ``ok``."""

    def __bool__(self) -> bool:
        """Whether the chain holds (``ok``)."""
        return self.ok

    def explain(self) -> str:
        """One line: ``"intact: N rows"`` or ``"row K: CODE: what is wrong"``."""
        if self.ok or self.reason is None:
            return f"intact: {self.rows_checked} rows"
        return f"row {self.first_bad_row}: {self.reason}: {FAULT_TEXT[self.reason]}"


AuditVerification.__module__ = "middleware.audit"
