"""`MemoryStore`'s conversations: records in lists only appended to in place, and their index.

See ``pipeline/stores/_conversation.py``: a `ConversationLog` answers `HistoryStore.load_history`
in O(1), its records as `HistoryView`s of its lists and its counts kept with each write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from .._history import HistoryView
from ._conversation import ConversationHistory, ConversationIndex

if TYPE_CHECKING:
    from ..calls._toolcall import ToolCall
    from ..models._message import Message

__all__ = ["ConversationLog", "RecordLog"]

T = TypeVar("T")
K = TypeVar("K")


class RecordLog(Generic[K, T]):
    """Records in storage order, keyed, in a list that is only ever appended to in place.

    A replaced or removed record makes a new list (the old one stays as it was), so a
    `HistoryView` of ``records`` taken earlier keeps showing what it showed, at no copy for
    the common case: a store appending one record at a time.
    """

    __slots__ = ("positions", "records")

    def __init__(self) -> None:
        """An empty log."""
        self.records: list[T] = []
        self.positions: dict[K, int] = {}

    def put(self, key: K, record: T) -> T | None:
        """Append ``record``, or replace the one under ``key`` in its place; return that one."""
        at = self.positions.get(key)
        if at is None:
            self.positions[key] = len(self.records)
            self.records.append(record)
            return None
        records = list(self.records)
        old, records[at] = records[at], record
        self.records = records
        return old

    def remove(self, key: K) -> T | None:
        """Remove the record under ``key``; return it (None when there was none)."""
        at = self.positions.pop(key, None)
        if at is None:
            return None
        records = list(self.records)
        old = records.pop(at)
        self.records = records
        for other, position in self.positions.items():
            if position > at:
                self.positions[other] = position - 1
        return old


class ConversationLog:
    """One conversation in process memory: its messages, its calls and their index.

    `MemoryStore` keeps one per conversation; a write costs O(1) (a replaced or deleted record
    copies the list once), and `history` costs O(1) whatever the conversation's length.
    """

    __slots__ = ("calls", "index", "messages")

    def __init__(self) -> None:
        """An empty conversation."""
        self.messages: RecordLog[str, Message] = RecordLog()
        self.calls: RecordLog[tuple[str, str], ToolCall] = RecordLog()
        self.index = ConversationIndex()

    def save_call(self, turn_id: str, call: ToolCall) -> None:
        """Keep ``call``, replacing its turn's call of that id in place."""
        index = self.index
        index.version += 1
        old = self.calls.put((turn_id, call.id), call)
        if old is not None:
            index.add(old, -1)
        index.add(call, 1)

    def delete_call(self, turn_id: str, call_id: str) -> bool:
        """Forget a turn's call; return whether it was there."""
        old = self.calls.remove((turn_id, call_id))
        if old is None:
            return False
        self.index.version += 1
        self.index.add(old, -1)
        return True

    def history(self) -> ConversationHistory:
        """The history as of now, in O(1): views of the logs and the live counts."""
        return self.index.history(
            HistoryView((), self.messages.records), HistoryView((), self.calls.records)
        )
