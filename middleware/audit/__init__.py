"""The audit wing: `AuditLog` and its hash-chained sinks (SQLite, JSON Lines, PostgreSQL).

`AuditLog` is a record keeper and an event observer of the runner (a short-circuiting middleware
cannot skip it): one chained row per stored tool call, written once from the stored record and
with the store's write (in its transaction when they share a database), a row per change to a
stored call and per decision about a tool, and one per turn; `sink.verify()` returns an
`AuditVerification`, truthy when the chain holds, else naming the first bad row and why. With
an `AuditKey` the chain is keyed (HMAC-SHA256: only the key's holder can write rows that
verify, and the stored head is sealed); an anchor (`AuditAnchorFile`) keeps each new head
outside the log. ``loopware audit verify`` and ``loopware audit show`` read any sink's log
(``docs/audit.md``). See ``docs/architecture.md`` and ``docs/audit-keys.md``.
"""

from ._anchor import AuditAnchor as AuditAnchor
from ._anchor import AuditAnchorFile as AuditAnchorFile
from ._chain import AuditDecision as AuditDecision
from ._chain import AuditEntry as AuditEntry
from ._chain import AuditHead as AuditHead
from ._chain import AuditRow as AuditRow
from ._chain import AuditSink as AuditSink
from ._jsonl import JsonlAuditSink as JsonlAuditSink
from ._key import AuditKey as AuditKey
from ._key import AuditKeyError as AuditKeyError
from ._key import AuditKeyMismatchError as AuditKeyMismatchError
from ._log import AuditLog as AuditLog
from ._postgres import PostgresAuditSink as PostgresAuditSink
from ._report import AuditFault as AuditFault
from ._report import AuditVerification as AuditVerification
from ._sqlite import SqliteAuditSink as SqliteAuditSink

__all__ = [
    "AuditAnchor",
    "AuditAnchorFile",
    "AuditDecision",
    "AuditEntry",
    "AuditFault",
    "AuditHead",
    "AuditKey",
    "AuditKeyError",
    "AuditKeyMismatchError",
    "AuditLog",
    "AuditRow",
    "AuditSink",
    "AuditVerification",
    "JsonlAuditSink",
    "PostgresAuditSink",
    "SqliteAuditSink",
]
