"""Persistence seams: where turns, messages and tool calls are kept, and where bodies are spooled.

`TurnStore` is the store seam (`MemoryStore` by default, `SqliteStore` for a real embedded
database, `PostgresStore` for a database shared by many processes); `SpoolStore` holds artifact
bodies (`MemorySpoolStore` by default, `FileSpoolStore` for bodies too large for memory).
A store that runs other writers' writes in its own transactions (an audit sink's rows beside
the call they record) is a `JointStore` and runs `TransactionWriter`s. See
``docs/architecture.md``. `SqliteStore`, `PostgresStore` and `FileSpoolStore` load when
first named, not on ``import pipeline`` (docs/architecture.md, "Import time").
"""

import types as _types
import typing as _typing

from ._spool import MemorySpoolStore as MemorySpoolStore
from ._spool import SpoolReader as SpoolReader
from ._spool import SpoolStore as SpoolStore
from ._store import JointStore as JointStore
from ._store import MemoryStore as MemoryStore
from ._store import TransactionWriter as TransactionWriter
from ._store import TurnRecord as TurnRecord
from ._store import TurnStore as TurnStore

if _typing.TYPE_CHECKING:
    from ._file_spool import FileSpoolStore as FileSpoolStore
    from ._postgres_store import PostgresStore as PostgresStore
    from ._sqlite_store import SqliteStore as SqliteStore

_LAZY = frozenset({"FileSpoolStore", "PostgresStore", "SqliteStore"})
"""The durable stores: exported here, loaded on first use."""


def __getattr__(name: str) -> _typing.Any:
    """Load a durable store's module when its name is first asked for."""
    module: _types.ModuleType
    if name == "FileSpoolStore":
        from . import _file_spool

        module = _file_spool
    elif name == "PostgresStore":
        from . import _postgres_store

        module = _postgres_store
    elif name == "SqliteStore":
        from . import _sqlite_store

        module = _sqlite_store
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the durable stores included before they load."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "FileSpoolStore",
    "JointStore",
    "MemorySpoolStore",
    "MemoryStore",
    "PostgresStore",
    "SpoolReader",
    "SpoolStore",
    "SqliteStore",
    "TransactionWriter",
    "TurnRecord",
    "TurnStore",
]
