"""The audit wing: `AuditLog` and its hash-chained sinks (SQLite, JSON Lines, PostgreSQL).

`AuditLog` observes the runner's events (a short-circuiting middleware cannot skip it) and
appends one chained row per completed tool call and per turn; `sink.verify()` names the first
broken row. See ``docs/architecture.md``.
"""

from ._chain import AuditDecision as AuditDecision
from ._chain import AuditEntry as AuditEntry
from ._chain import AuditHead as AuditHead
from ._chain import AuditRow as AuditRow
from ._chain import AuditSink as AuditSink
from ._jsonl import JsonlAuditSink as JsonlAuditSink
from ._log import AuditLog as AuditLog
from ._postgres import PostgresAuditSink as PostgresAuditSink
from ._sqlite import SqliteAuditSink as SqliteAuditSink

__all__ = [
    "AuditDecision",
    "AuditEntry",
    "AuditHead",
    "AuditLog",
    "AuditRow",
    "AuditSink",
    "JsonlAuditSink",
    "PostgresAuditSink",
    "SqliteAuditSink",
]
