"""Type checks for the stores and audit sinks (checked by mypy, never collected by pytest)."""

from __future__ import annotations

from typing import assert_type

from middleware.audit import AuditLog, AuditSink, PostgresAuditSink, SqliteAuditSink
from pipeline import TurnRunner
from pipeline.stores import (
    FileSpoolStore,
    MemorySpoolStore,
    PostgresStore,
    SpoolStore,
    SqliteStore,
    TurnRecord,
    TurnStore,
)


async def main() -> None:
    # Both durable stores are TurnStores and take a spool store.
    spool = FileSpoolStore("/tmp/spool")
    postgres = PostgresStore("dbname=app", spool=spool, min_size=1, max_size=8, timeout=5.0)
    sqlite = SqliteStore("agent.db", spool=MemorySpoolStore())
    stores: list[TurnStore] = [postgres, sqlite]
    spools: list[SpoolStore] = [postgres.spool, sqlite.spool]
    assert_type(await postgres.turn("t"), TurnRecord | None)
    TurnRunner(store=postgres, spool=spool)

    # The PostgreSQL spool is required, and given by keyword.
    PostgresStore("dbname=app")  # type: ignore[call-arg]
    PostgresStore("dbname=app", spool)  # type: ignore[call-arg]

    # Both audit sinks satisfy AuditSink; a chain is named by a string.
    sinks: list[AuditSink] = [PostgresAuditSink("dbname=app", chain="prod"), SqliteAuditSink("a")]
    AuditLog(PostgresAuditSink("dbname=app"))
    PostgresAuditSink("dbname=app", chain=3)  # type: ignore[arg-type]
    del stores, spools, sinks
