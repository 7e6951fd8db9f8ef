"""Fixtures shared by every test package: the throw-away PostgreSQL server (``tests/_pg.py``)."""

from __future__ import annotations

from ._pg import pg_conninfo as pg_conninfo
from ._pg import pg_server as pg_server

__all__ = ["pg_conninfo", "pg_server"]
