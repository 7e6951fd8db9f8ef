"""`bench.audit_chain`'s PostgreSQL cases: the server, the sink, and the raw insert beside it.

The server is a throw-away one (``tests/_pg.py``: ``initdb``/``pg_ctl``, Unix socket) running
**with** ``fsync``, unless ``--conninfo`` names one. Durability is the connection's
``synchronous_commit``, set in the connection string both writers use: ``full`` is ``on`` (a
committed row survives power loss), ``normal`` is ``off`` (it survives a killed client, and the
server's crash loses at most its last commits).

`RawPostgres` is the limit: the same rows (the sink's table layout, ``LIKE
loopware.audit_rows``; free text as ``bytea``; two fixed 64-digit hex strings for the hashes)
inserted by one pipelined transaction per append (``BEGIN``, ``executemany``, ``COMMIT``: one
round trip, the sink's shape; psycopg's ``transaction()`` would add a round trip), on a
psycopg ``AsyncConnection`` of the benchmark's own event loop (no thread hop), without the
chain, the head row, its lock or the sink's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from middleware.audit import AuditEntry

__all__ = ["RawPostgres", "durable", "server"]

_FREE_TEXT = frozenset(
    ("turn_id", "conversation_id", "call_id", "tool", "checksum", "args", "policy", "reason",
     "error", "input", "decisions")
)
_cases = itertools.count()


@contextlib.contextmanager
def server(conninfo: str | None) -> Iterator[str]:
    """Yield a connection string: ``conninfo``, or a throw-away server's (with ``fsync``)."""
    if conninfo:
        yield conninfo
        return
    from tests._pg import cluster

    with cluster(fsync=True) as pg:
        yield pg.create_database("bench_audit")


def durable(conninfo: str, sync: str) -> str:
    """``conninfo`` with ``synchronous_commit`` for ``sync`` (see the module docstring)."""
    setting = "on" if sync == "full" else "off"
    return f"{conninfo} options='-c synchronous_commit={setting}'"


class RawPostgres:
    """Rows inserted by one pipelined transaction per append: no chain, no head, no lock."""

    def __init__(
        self,
        conn: Any,
        table: str,
        columns: Sequence[str],
        values: Callable[[AuditEntry], tuple[Any, ...]],
    ) -> None:
        """Use ``conn`` (an open ``AsyncConnection``) and a table made by `create`; ``values``
        gives an entry's values in ``columns`` order."""
        self._conn = conn
        self._values = values
        self._table = table
        self._columns = tuple(columns)
        names = ", ".join(("chain", "idx", *self._columns, "prev_hash", "hash"))
        marks = ", ".join(["%s"] * (len(self._columns) + 4))
        self._insert = f"INSERT INTO {table} ({names}) VALUES ({marks})"
        self._count = 0

    @classmethod
    async def create(
        cls, conninfo: str, columns: Sequence[str], values: Callable[[AuditEntry], tuple[Any, ...]]
    ) -> RawPostgres:
        """Connect and make a fresh table shaped as the sink's."""
        import psycopg

        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        table = f"loopware.raw_audit_{next(_cases)}"
        await conn.execute(f"CREATE TABLE {table} (LIKE loopware.audit_rows INCLUDING ALL)")
        return cls(conn, table, columns, values)

    def _row(self, index: int, values: tuple[Any, ...]) -> tuple[Any, ...]:
        filler = "f" * 64
        cells = [
            v.encode() if name in _FREE_TEXT and isinstance(v, str)
            else int(v) if isinstance(v, bool) else v
            for name, v in zip(self._columns, values, strict=True)
        ]
        return ("raw", index, *cells, filler, filler)

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        """Insert the rows of ``entries`` in one pipelined transaction."""
        start = self._count
        self._count += len(entries)
        rows = [self._row(i, self._values(e)) for i, e in enumerate(entries, start)]
        conn = self._conn
        async with conn.pipeline(), conn.cursor() as cur:  # one round trip, as the sink's
            await cur.execute("BEGIN")
            await cur.executemany(self._insert, rows)
            await cur.execute("COMMIT")

    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Task[None]:
        """Start writing ``entries``; the task completes once they are committed."""
        return asyncio.ensure_future(self.write(entries))

    def close(self) -> None:
        """Nothing to do here: `aclose` closes the connection."""

    async def aclose(self) -> None:
        """Close the connection."""
        await self._conn.close()
