"""The durable store backends the parametrised store suites run against (SQLite, PostgreSQL).

A `StoreBackend` opens stores on one database (a file, or a fresh PostgreSQL database), runs raw
SQL against it the way a tamperer would (``?`` placeholders, unqualified table names, for both),
and says how a child process opens the same store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pipeline.models import Message
from pipeline.stores import (
    FileSpoolStore,
    PostgresStore,
    SpoolStore,
    SqliteStore,
    TurnRecord,
    TurnStore,
)

__all__ = ["DurableStore", "PostgresBackend", "SqliteBackend", "StoreBackend"]


class DurableStore(TurnStore, Protocol):
    """What `SqliteStore` and `PostgresStore` both offer beyond `TurnStore`."""

    @property
    def spool(self) -> SpoolStore: ...

    async def tool_calls_for_turn(self, turn_id: str) -> list[Any]: ...

    async def messages_for_turn(self, turn_id: str) -> list[Message]: ...

    async def turn(self, turn_id: str) -> TurnRecord | None: ...

    async def aclose(self) -> None: ...


class StoreBackend(Protocol):
    """One database and how to reach it."""

    name: str
    target: str
    """The database file or connection string a child process opens."""
    spool_dir: Path
    """The directory of the spool every store of this backend uses by default."""

    async def open(self, *, spool: SpoolStore | None = None) -> DurableStore:
        """Open (and migrate) a new store on the database."""
        ...

    def sql(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run one statement outside the store, committed; return its rows (if any)."""
        ...

    def child_opener(self) -> str:
        """A Python expression a child opens the store with (``sys.argv[1]`` is `target`,
        ``sys.argv[2]`` the spool directory)."""
        ...


class SqliteBackend:
    """An SQLite database file (its default spool: ``<file>-spool``)."""

    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.target = str(folder / "turns.db")
        self.spool_dir = Path(self.target + "-spool")

    async def open(self, *, spool: SpoolStore | None = None) -> DurableStore:
        return SqliteStore(self.target, synchronous="normal", spool=spool)

    def sql(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.target) as conn:
            rows = conn.execute(statement, tuple(params)).fetchall()
        conn.close()
        return rows

    def child_opener(self) -> str:
        return "SqliteStore(sys.argv[1])"


class PostgresBackend:
    """A fresh PostgreSQL database (its spool: a `FileSpoolStore` in a temporary directory)."""

    name = "postgres"

    def __init__(self, conninfo: str, folder: Path) -> None:
        self.target = conninfo
        self.spool_dir = folder / "spool"

    async def open(self, *, spool: SpoolStore | None = None) -> DurableStore:
        store = PostgresStore(self.target, spool=spool or FileSpoolStore(self.spool_dir))
        await store.open()
        return store

    def sql(self, statement: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.target) as conn:
            conn.execute("SET search_path TO loopware")
            cur = conn.execute(statement.replace("?", "%s"), tuple(params))
            return cur.fetchall() if cur.description is not None else []

    def child_opener(self) -> str:
        return "PostgresStore(sys.argv[1], spool=FileSpoolStore(sys.argv[2]))"
