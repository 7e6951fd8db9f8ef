"""Persistence seams: where turns, messages and tool calls are kept, and where bodies are spooled.

`TurnStore` is the store seam (`MemoryStore` by default, `SqliteStore` for a real embedded
database, `PostgresStore` for a database shared by many processes); `SpoolStore` holds artifact
bodies (`MemorySpoolStore` by default, `FileSpoolStore` for bodies too large for memory).
A store that runs other writers' writes in its own transactions (an audit sink's rows beside
the call they record) is a `JointStore` and runs `TransactionWriter`s. A store that keeps
counts across turns and processes for scoped limits (all three stores) is a `CounterStore`; one
that keeps each conversation's counts as it writes, so a turn's start does not grow with the
conversation (all three), is a `HistoryStore` answering a `ConversationHistory`. See
``docs/architecture.md``. `SqliteStore`, `PostgresStore` and `FileSpoolStore` load when
first named, not on ``import pipeline`` (docs/architecture.md, "Import time").
"""

import typing as _typing

from .._lazy import lazy_exports as _lazy_exports
from ._conversation import ConversationHistory as ConversationHistory
from ._conversation import HistoryStore as HistoryStore
from ._conversation import LazyRecords as LazyRecords
from ._counters import CounterLimit as CounterLimit
from ._counters import CounterStore as CounterStore
from ._counters import SlotGrant as SlotGrant
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

__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "FileSpoolStore": "_file_spool",
        "PostgresStore": "_postgres_store",
        "SqliteStore": "_sqlite_store",
    },
    globals(),
)
"""The durable stores: exported here, loaded on first use."""


__all__ = [
    "ConversationHistory",
    "CounterLimit",
    "CounterStore",
    "FileSpoolStore",
    "HistoryStore",
    "JointStore",
    "LazyRecords",
    "MemorySpoolStore",
    "MemoryStore",
    "PostgresStore",
    "SlotGrant",
    "SpoolReader",
    "SpoolStore",
    "SqliteStore",
    "TransactionWriter",
    "TurnRecord",
    "TurnStore",
]
