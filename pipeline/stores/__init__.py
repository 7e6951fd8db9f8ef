"""Persistence seams: where turns, messages and tool calls are kept, and where bodies are spooled.

`TurnStore` is the store seam (`MemoryStore` by default, `SqliteStore` for a real embedded
database, `PostgresStore` for a database shared by many processes); `SpoolStore` holds artifact
bodies (`MemorySpoolStore` by default, `FileSpoolStore` for bodies too large for memory).
See ``docs/architecture.md``.
"""

from ._file_spool import FileSpoolStore as FileSpoolStore
from ._postgres_store import PostgresStore as PostgresStore
from ._spool import MemorySpoolStore as MemorySpoolStore
from ._spool import SpoolReader as SpoolReader
from ._spool import SpoolStore as SpoolStore
from ._sqlite_store import SqliteStore as SqliteStore
from ._store import MemoryStore as MemoryStore
from ._store import TurnRecord as TurnRecord
from ._store import TurnStore as TurnStore

__all__ = [
    "FileSpoolStore",
    "MemorySpoolStore",
    "MemoryStore",
    "PostgresStore",
    "SpoolReader",
    "SpoolStore",
    "SqliteStore",
    "TurnRecord",
    "TurnStore",
]
