"""The database stores' side of a conversation's kept counts (docs/architecture.md).

`SqliteStore` and `PostgresStore` keep, per conversation, a version (``conversations``) and one
row per counted key (``conversation_counts``: how many stored calls carry a checksum, a
validated checksum or a call id, and the version that last changed the row), written in the
transaction of each call's write. A store instance keeps the indexes it read (`IndexCache`)
and, at a turn's start, reads only the rows changed since the version it holds: the same cost
at the 10th and the 10,000th turn, and exact with any number of processes writing (each write
bumps the version under the conversation's row lock, so versions follow commit order).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._conversation import ConversationIndex, IndexKind

if TYPE_CHECKING:
    from ..calls._toolcall import ToolCall

__all__ = ["CACHED_CONVERSATIONS", "CallKeys", "IndexCache", "call_keys", "deltas"]

CallKeys = tuple[str, str | None, str]
"""What a stored call counts under: its checksum, validated checksum (if any) and id."""

CACHED_CONVERSATIONS = 256
"""How many conversations' indexes a store instance keeps (least recently read first out)."""


def call_keys(call: ToolCall) -> CallKeys:
    """The keys ``call`` counts under."""
    return call.checksum, call.validated_checksum, call.id


def deltas(old: CallKeys | None, new: CallKeys | None) -> list[tuple[IndexKind, str, int]]:
    """The count changes of replacing ``old`` by ``new`` (None: no call), zeros left out."""
    changes: dict[tuple[IndexKind, str], int] = {}
    for keys, sign in ((old, -1), (new, 1)):
        if keys is None:
            continue
        checksum, validated, call_id = keys
        changes["c", checksum] = changes.get(("c", checksum), 0) + sign
        if validated is not None:
            changes["v", validated] = changes.get(("v", validated), 0) + sign
        changes["i", call_id] = changes.get(("i", call_id), 0) + sign
    return [(kind, key, n) for (kind, key), n in changes.items() if n]


class IndexCache:
    """The conversation indexes a store instance read, each at the version it read.

    Used on one thread at a time (the store's worker thread, or its event loop).
    """

    __slots__ = ("_indexes", "_size")

    def __init__(self, size: int = CACHED_CONVERSATIONS) -> None:
        """Keep up to ``size`` conversations."""
        self._indexes: OrderedDict[str, ConversationIndex] = OrderedDict()
        self._size = size

    def version(self, scope: str) -> int:
        """The version held for ``scope``'s conversation (0: none, read every row)."""
        index = self._indexes.get(scope)
        return 0 if index is None else index.version

    def refresh(
        self, scope: str, version: int, rows: Iterable[tuple[str, str, int, int]]
    ) -> ConversationIndex:
        """Apply the rows read since the held version, now at ``version``; return the index.

        ``rows`` are (kind, key, n, row version) as the table holds them, read in one snapshot
        with ``version``. When the held index is already as new (another read of the same
        conversation finished first), it is kept as it is: rows hold absolute counts, and an
        older snapshot's must not overwrite a newer one's.
        """
        indexes = self._indexes
        index = indexes.get(scope)
        if index is None:
            index = ConversationIndex()
        if index.version < version:
            for kind, key, n, at in rows:
                index.put(kind, key, n, at)
            index.version = version
        indexes[scope] = index
        indexes.move_to_end(scope)
        while len(indexes) > self._size:
            indexes.popitem(last=False)
        return index
