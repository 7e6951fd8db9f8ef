"""Type checks for record keepers and joint stores (checked by mypy, never collected by pytest)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import assert_type

from middleware.audit import AuditLog, JsonlAuditSink, SqliteAuditSink
from pipeline.stages import JointRecordKeeper, RecordChange, RecordKeeper
from pipeline.stores import (
    JointStore,
    MemorySpoolStore,
    MemoryStore,
    PostgresStore,
    SqliteStore,
    TransactionWriter,
    TurnStore,
)


class Counting:
    """A keeper of its own: counts the changes it is told of."""

    def __init__(self) -> None:
        self.seen = 0

    def keep(self, change: RecordChange) -> Awaitable[object]:
        self.seen += 1
        raise NotImplementedError


class Wrong:
    """``keep`` takes a call, not a change."""

    def keep(self, call: str) -> Awaitable[object]:
        raise NotImplementedError


def main(change: RecordChange) -> None:
    # AuditLog keeps records, in the store's transaction when it shares its database.
    audit = AuditLog(SqliteAuditSink("audit.sqlite"))
    keepers: list[RecordKeeper] = [audit, Counting(), AuditLog(JsonlAuditSink("a.jsonl"))]
    joint: JointRecordKeeper = audit
    assert_type(joint.joint(change), TransactionWriter)
    assert_type(audit.joins("sqlite:/x"), bool)
    bad: RecordKeeper = Wrong()  # type: ignore[assignment]

    # The built-in durable stores run other writers in their transactions; MemoryStore does not.
    stores: list[JointStore] = [
        SqliteStore("agent.db"),
        PostgresStore("dbname=app", spool=MemorySpoolStore()),
    ]
    also: list[TurnStore] = [*stores, MemoryStore()]
    not_joint: JointStore = MemoryStore()  # type: ignore[assignment]
    assert_type(change.call.verdict, str)  # type: ignore[assert-type]  # a Literal, not str
    del keepers, bad, stores, also, not_joint
