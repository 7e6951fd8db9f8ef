"""Rows as the audit sinks wrote them before a call's row said whether it ran (``ran``) and
carried its decisions (``decisions``): sixteen fields, every one of them hashed.

The helpers of the suites that build such logs by hand; ``tests/data/audit/`` holds logs the old
code itself wrote.
"""

from __future__ import annotations

from typing import Any

from middleware.audit import AuditEntry
from middleware.audit._chain import entry_to_fields

__all__ = ["OLD_COLUMNS", "old_fields"]

OLD_COLUMNS = (
    "kind", "turn_id", "conversation_id", "recorded_at", "call_id", "tool", "checksum", "args",
    "is_error", "duration_ms", "decision", "policy", "reason", "status", "error", "input",
)
"""An old row's fields, in the old column order."""


def old_fields(entry: AuditEntry) -> dict[str, Any]:
    """The fields an old sink stored and hashed for ``entry`` (which sets neither new field)."""
    assert entry.ran is None
    assert entry.decisions is None
    fields = entry_to_fields(entry)
    return {name: fields[name] for name in OLD_COLUMNS}
