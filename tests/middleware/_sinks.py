"""The audit sink backends the parametrised audit suites run against.

A `SinkBackend` opens a sink (keyed and anchored when asked) on a log named by a folder (a JSON
Lines file, an SQLite file, or a chain named after the folder in the test's PostgreSQL database)
and, for the SQL ones, runs a tamperer's SQL against it, written once for both: ``?``
placeholders and SQLite's table names ``audit_rows`` and ``audit_head``. For SQLite, whose head
is the last row of ``audit_rows``, `SqliteSinks.sql` first creates a temporary ``audit_head``
view over that row. For PostgreSQL, `PostgresSinks.sql` first creates temporary views with those
names over the folder's chain only (``audit_chains`` holds one head row per chain), so the same
statements touch that log and no other.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from middleware.audit import (
    AuditAnchor,
    AuditKey,
    JsonlAuditSink,
    PostgresAuditSink,
    SqliteAuditSink,
)

__all__ = ["JsonlSinks", "PostgresSinks", "Sink", "SinkBackend", "SqliteSinks"]

Sink = SqliteAuditSink | JsonlAuditSink | PostgresAuditSink


class SinkBackend(Protocol):
    """Where a kind of sink keeps its logs."""

    name: str

    def open(
        self, folder: Path, *, key: AuditKey | None = None, anchor: AuditAnchor | None = None
    ) -> Sink:
        """Open a sink on the log of ``folder`` (created when missing), keyed by ``key``."""
        ...

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        """Run one committed statement against the log of ``folder`` (SQL sinks only)."""
        ...


class JsonlSinks:
    """`JsonlAuditSink` logs: ``<folder>/audit.jsonl``."""

    name = "jsonl"

    def open(
        self, folder: Path, *, key: AuditKey | None = None, anchor: AuditAnchor | None = None
    ) -> Sink:
        return JsonlAuditSink(
            folder / "audit.jsonl", synchronous="normal", key=key, anchor=anchor
        )

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        raise TypeError("a JSON Lines log has no SQL")


class SqliteSinks:
    """`SqliteAuditSink` logs: ``<folder>/audit.sqlite``."""

    name = "sqlite"

    def open(
        self, folder: Path, *, key: AuditKey | None = None, anchor: AuditAnchor | None = None
    ) -> Sink:
        return SqliteAuditSink(
            folder / "audit.sqlite", synchronous="normal", key=key, anchor=anchor
        )

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        with sqlite3.connect(folder / "audit.sqlite") as conn:
            for temp in _SQLITE_HEAD_VIEW:
                conn.execute(temp)
            rows = conn.execute(statement, tuple(params)).fetchall()
        conn.close()
        return rows


_SQLITE_HEAD_VIEW = (
    "CREATE TEMP VIEW audit_head AS SELECT 1 AS id, head_count AS count, hash "
    "FROM main.audit_rows WHERE prev_hash IS NULL AND head_count IS NOT NULL",
    "CREATE TEMP TRIGGER audit_head_update INSTEAD OF UPDATE ON audit_head BEGIN "
    "UPDATE audit_rows SET idx = NEW.count, head_count = NEW.count, hash = NEW.hash "
    "WHERE prev_hash IS NULL AND head_count = OLD.count; END",
)
"""``audit_head`` over an SQLite log's head row (the last row of ``audit_rows``), so a tamperer's
``UPDATE audit_head`` moves that row as it would have rewritten the old one-row table."""


class PostgresSinks:
    """`PostgresAuditSink` logs: a fresh database per folder on the test server."""

    name = "postgres"

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    def open(
        self, folder: Path, *, key: AuditKey | None = None, anchor: AuditAnchor | None = None
    ) -> Sink:
        return PostgresAuditSink(self.conninfo, chain=str(folder), key=key, anchor=anchor)

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        import psycopg
        from psycopg import sql

        chain = sql.Literal(str(folder))
        with psycopg.connect(self.conninfo) as conn:
            for view in (
                sql.SQL("CREATE TEMP VIEW audit_rows AS SELECT * FROM loopware.audit_rows "
                        "WHERE chain = {} WITH CHECK OPTION").format(chain),
                sql.SQL("ALTER VIEW audit_rows ALTER COLUMN chain SET DEFAULT {}").format(chain),
                sql.SQL("CREATE TEMP VIEW audit_head AS SELECT * FROM loopware.audit_chains "
                        "WHERE chain = {}").format(chain),
            ):
                conn.execute(view)
            cur = conn.execute(statement.replace("?", "%s"), tuple(params))
            return cur.fetchall() if cur.description is not None else []
