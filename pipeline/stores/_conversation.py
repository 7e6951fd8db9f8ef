"""A conversation's history as a turn reads it, kept incrementally by the stores.

A turn of a conversation needs four things of the turns before it: how many stored calls carry
each checksum and each validated checksum (repetition, ``tool_call_count``), whether a call id
is taken, and the messages and calls themselves (the model request, ``ctx.history``). Counting
them from every stored call at every turn made a turn's start grow with the conversation
(docs/architecture.md, "A conversation's history"). A `HistoryStore` answers with a
`ConversationHistory` instead: counts it keeps with each write (`ConversationIndex`), and the
records as sequences that cost nothing until read (`LazyRecords`, or a view of a list the store
only appends to).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypeVar,
    overload,
    runtime_checkable,
)

if TYPE_CHECKING:
    from ..calls._toolcall import ToolCall
    from ..models._message import Message

__all__ = [
    "ConversationHistory",
    "ConversationIndex",
    "HistoryStore",
    "IndexKind",
    "LazyRecords",
    "TakenIds",
    "added_counts",
    "bump_count",
    "load_records",
    "reads_its_own_way",
]

T = TypeVar("T")

IndexKind = Literal["c", "v", "i"]
"""What a row of a conversation's index counts: checksums, validated checksums, call ids."""

_CHECKSUM = attrgetter("checksum")
_VALIDATED = attrgetter("validated_checksum")
_CALL_ID = attrgetter("id")


class TakenIds(Container[str]):
    """The call ids a conversation had stored as of one version of its index (membership only).

    It reads the index's live table of ids, each with the version that first stored it, so it
    is not a copy: an id stored after that version (by a turn running beside the reader) is
    not taken for it, as a copy made at the turn's start would not hold it either.
    """

    __slots__ = ("_ids", "_version")

    def __init__(self, ids: Mapping[str, int], version: int) -> None:
        """Answer for the ids of ``ids`` (id -> version that stored it) up to ``version``."""
        self._ids = ids
        self._version = version

    def __contains__(self, call_id: object) -> bool:
        """True when ``call_id`` was stored at or before the version (O(1))."""
        since = self._ids.get(call_id) if isinstance(call_id, str) else None
        return since is not None and since <= self._version

    def __repr__(self) -> str:
        """Show the version it answers for."""
        return f"TakenIds(version={self._version})"


class LazyRecords(Sequence[T]):
    """A read-only sequence of stored records that loads them on first use, once.

    Its length is a use too: whoever reads the history pays for loading it, and a turn whose
    executor never reads it (a replay) pays nothing. ``load`` runs synchronously in the
    thread that first reads (a store runs its query there, or waits for its own thread), so a
    reader on an event loop awaits `aload` first (``TurnView.load_history``) to keep the loop
    running while a long conversation loads.
    """

    __slots__ = ("_load", "_records")

    def __init__(self, load: Callable[[], Sequence[T]]) -> None:
        """Hold ``load`` until the records are first read."""
        self._load: Callable[[], Sequence[T]] | None = load
        self._records: Sequence[T] = ()

    def _get(self) -> Sequence[T]:
        load = self._load
        if load is not None:
            self._records = load()
            self._load = None
        return self._records

    @property
    def loaded(self) -> bool:
        """Whether the records were read (and so loaded) already."""
        return self._load is None

    async def aload(self) -> None:
        """Load the records now, in a worker thread: the event loop runs on meanwhile."""
        load = self._load
        if load is not None:
            records = await asyncio.to_thread(load)
            if self._load is not None:  # not loaded by a read meanwhile
                self._records, self._load = records, None

    def __len__(self) -> int:
        """The number of records (loads them)."""
        return len(self._get())

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        """A record, or the records a slice selects (loads them)."""
        return self._get()[index]

    def __iter__(self) -> Iterator[T]:
        """The records, oldest first (loads them)."""
        return iter(self._get())

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence (not a str) holding the same records (loads them)."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        mine = self._get()
        return len(other) == len(mine) and all(a == b for a, b in zip(mine, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compares by content, like a list

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and deepcopy) as a plain tuple of the records (loads them)."""
        return (tuple, (tuple(self._get()),))

    def __repr__(self) -> str:
        """Say whether the records are loaded, without loading them."""
        return f"LazyRecords(loaded={self.loaded})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationHistory:
    """What a turn reads of its conversation's earlier turns (`HistoryStore.load_history`).

    The counts are the store's as of the load: the turn copies them into its own (its calls
    count on top). ``call_ids`` answers membership without holding a set of every id, and
    ``messages`` and ``calls`` may load when first read (`LazyRecords`).
    """

    messages: Sequence[Message]
    """The conversation's messages, in storage order."""
    calls: Sequence[ToolCall]
    """Its stored tool calls, in storage order."""
    checksums: Mapping[str, int]
    """Stored calls per ``checksum``."""
    validated: Mapping[str, int]
    """Stored calls per ``validated_checksum`` (those that carry one)."""
    call_ids: Container[str]
    """The ids of its stored calls (``in`` only)."""

    @classmethod
    def of_records(
        cls, messages: Sequence[Message], calls: Sequence[ToolCall]
    ) -> ConversationHistory:
        """The history of loaded records, counted here (a store that keeps no index)."""
        validated = Counter(map(_VALIDATED, calls))
        validated.pop(None, None)
        return cls(
            messages=messages,
            calls=calls,
            checksums=Counter(map(_CHECKSUM, calls)),
            validated=validated,
            call_ids=frozenset(map(_CALL_ID, calls)),
        )


def added_counts(counts: dict[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """``counts`` plus ``more``: a copy of ``more`` (in C) when ``counts`` is empty."""
    if not counts:
        return dict(more)
    for key, n in more.items():
        counts[key] = counts.get(key, 0) + n
    return counts


async def load_records(*sequences: Sequence[object]) -> None:
    """Load the `LazyRecords` among ``sequences`` now, in worker threads (`LazyRecords.aload`)."""
    for records in sequences:
        if isinstance(records, LazyRecords):
            await records.aload()


@runtime_checkable
class HistoryStore(Protocol):
    """A `TurnStore` that keeps each conversation's counts as it writes (all three stores).

    A turn of a conversation then starts from `load_history`, whose cost does not grow with the
    conversation; a store without it is read with ``load_conversation`` and counted at each turn.
    """

    async def load_history(self, conversation_id: str) -> ConversationHistory:
        """The conversation's history as of now (see `ConversationHistory`)."""
        ...


class ConversationIndex:
    """One conversation's counts, kept as its calls are written; a store's, not public.

    ``version`` grows with every change; each id remembers the version that stored it, so a
    `TakenIds` reads the live table as of an older version. `MemoryStore` changes it with
    `add`/`remove`; the database stores keep the counts in a table and copy the rows changed
    since the version they hold with `put` (docs/architecture.md, "A conversation's history").
    """

    __slots__ = ("checksums", "id_counts", "ids", "validated", "version")

    def __init__(self) -> None:
        """An empty index at version 0."""
        self.version = 0
        self.checksums: dict[str, int] = {}
        self.validated: dict[str, int] = {}
        self.ids: dict[str, int] = {}
        """Call id -> the version that stored it (while any call of the id is stored)."""
        self.id_counts: dict[str, int] = {}
        """Call id -> how many stored calls have it (`add` only: turns may share an id)."""

    def add(self, call: ToolCall, delta: int) -> None:
        """Count ``call`` in (``delta`` 1) or out (-1).

        The caller bumps ``version`` once per write, before its changes.
        """
        bump_count(self.checksums, call.checksum, delta)
        vkey = call.validated_checksum
        if vkey is not None:
            bump_count(self.validated, vkey, delta)
        cid = call.id
        if bump_count(self.id_counts, cid, delta):
            self.ids.setdefault(cid, self.version)
        else:
            self.ids.pop(cid, None)

    def put(self, kind: str, key: str, n: int, version: int) -> None:
        """Set one count as a store's index table holds it (``n`` 0: none left)."""
        if kind == "i":
            if n > 0:
                self.ids.setdefault(key, version)
            else:
                self.ids.pop(key, None)
            return
        counts = self.checksums if kind == "c" else self.validated
        if n > 0:
            counts[key] = n
        else:
            counts.pop(key, None)

    def history(
        self, messages: Sequence[Message], calls: Sequence[ToolCall], *, copy: bool = False
    ) -> ConversationHistory:
        """The history as of now: these records, the counts, the ids as of this version.

        The counts are the live ones (the reader copies them at once), or copies when ``copy``
        (the index changes on another thread than the reader's). The ids are never copied: a
        `TakenIds` reads the live table as of this version.
        """
        checksums, validated = self.checksums, self.validated
        return ConversationHistory(
            messages=messages,
            calls=calls,
            checksums=checksums.copy() if copy else checksums,
            validated=validated.copy() if copy else validated,
            call_ids=TakenIds(self.ids, self.version),
        )


def bump_count(counts: dict[str, int], key: str, delta: int) -> int:
    """Add ``delta`` to ``counts[key]``, dropping the key at zero; return the new count."""
    n = counts.get(key, 0) + delta
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)
    return n


def reads_its_own_way(store: object, base: type, method: str = "load_conversation") -> bool:
    """Whether ``store``'s class overrides ``base``'s ``method`` (a user's store reading its way).

    Such a store's `HistoryStore.load_history` reads through that method and counts the records
    (`ConversationHistory.of_records`), so what the override answers is what a turn sees.
    """
    return getattr(type(store), method) is not getattr(base, method)


for _cls in (ConversationHistory, HistoryStore, LazyRecords):
    _cls.__module__ = "pipeline.stores"
