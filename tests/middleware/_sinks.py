"""The audit sink backends the parametrised audit suites run against.

A `SinkBackend` opens a sink on a log named by a folder (a JSON Lines file, an SQLite file, or a
chain named after the folder in the test's PostgreSQL database) and, for the SQL ones, runs a
tamperer's SQL against it, written once for both: ``?`` placeholders and SQLite's table names
``audit_rows`` and ``audit_head``. For PostgreSQL, `PostgresSinks.sql` first creates temporary
views with those names over the folder's chain only (``audit_chains`` holds one head row per
chain), so the same statements touch that log and no other.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from middleware import JsonlAuditSink, PostgresAuditSink, SqliteAuditSink

__all__ = ["JsonlSinks", "PostgresSinks", "Sink", "SinkBackend", "SqliteSinks"]

Sink = SqliteAuditSink | JsonlAuditSink | PostgresAuditSink


class SinkBackend(Protocol):
    """Where a kind of sink keeps its logs."""

    name: str

    def open(self, folder: Path) -> Sink:
        """Open a sink on the log of ``folder`` (created when missing)."""
        ...

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        """Run one committed statement against the log of ``folder`` (SQL sinks only)."""
        ...


class JsonlSinks:
    """`JsonlAuditSink` logs: ``<folder>/audit.jsonl``."""

    name = "jsonl"

    def open(self, folder: Path) -> Sink:
        return JsonlAuditSink(folder / "audit.jsonl", synchronous="normal")

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        raise TypeError("a JSON Lines log has no SQL")


class SqliteSinks:
    """`SqliteAuditSink` logs: ``<folder>/audit.sqlite``."""

    name = "sqlite"

    def open(self, folder: Path) -> Sink:
        return SqliteAuditSink(folder / "audit.sqlite", synchronous="normal")

    def sql(
        self, folder: Path, statement: str, params: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        with sqlite3.connect(folder / "audit.sqlite") as conn:
            rows = conn.execute(statement, tuple(params)).fetchall()
        conn.close()
        return rows


class PostgresSinks:
    """`PostgresAuditSink` logs: a fresh database per folder on the test server."""

    name = "postgres"

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    def open(self, folder: Path) -> Sink:
        return PostgresAuditSink(self.conninfo, chain=str(folder))

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
