"""What the audit holds after a host's run that a limit of one nacked at its second call."""

from __future__ import annotations

from middleware.audit import JsonlAuditSink


def assert_audit_ends_at_the_nack(sink: JsonlAuditSink) -> None:
    """``c0`` ran, ``c1`` was denied (the nack), each has one row, none after, and it verifies."""
    rows = [r.entry for r in sink.rows() if r.entry.kind == "tool_call"]
    assert [(e.call_id, e.decision, e.ran) for e in rows] == [
        ("c0", "allowed", True),
        ("c1", "denied", False),
    ]
    assert sink.verify().ok
