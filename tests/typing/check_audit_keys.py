"""Type checks for audit keys and anchors (checked by mypy, never collected by pytest)."""

from __future__ import annotations

import logging
from typing import assert_type

from middleware.audit import (
    AuditAnchor,
    AuditAnchorFile,
    AuditHead,
    AuditKey,
    AuditSink,
    JsonlAuditSink,
    PostgresAuditSink,
    SqliteAuditSink,
)


def main() -> None:
    # A key is built from bytes, the environment or a file; its id is text.
    key = AuditKey.from_env("LOOPWARE_AUDIT_KEY")
    assert_type(AuditKey.from_file("audit.key"), AuditKey)
    assert_type(key.id, str)
    AuditKey("00" * 32)  # type: ignore[arg-type]

    # Every sink takes the key and an anchor: a file, print, a logger, a list's append.
    heads: list[AuditHead] = []
    anchors: list[AuditAnchor] = [
        AuditAnchorFile("/elsewhere/audit.anchor"),
        print,
        logging.getLogger("audit").info,
        heads.append,
    ]
    sinks: list[AuditSink] = [
        SqliteAuditSink("a.sqlite", key=key, anchor=anchors[0]),
        JsonlAuditSink("a.jsonl", key=key, anchor=print),
        PostgresAuditSink("dbname=app", key=None, anchor=heads.append),
    ]
    assert_type(AuditAnchorFile("x").read(), AuditHead | None)

    # Raw bytes are not a key, and a path is not an anchor.
    SqliteAuditSink("a.sqlite", key=b"0" * 32)  # type: ignore[arg-type]
    JsonlAuditSink("a.jsonl", anchor="head.anchor")  # type: ignore[arg-type]
    del sinks
