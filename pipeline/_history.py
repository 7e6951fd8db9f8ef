"""`HistoryView`: a turn's history as it stood at one moment, shared instead of copied.

Every iteration hands the model the whole conversation (``ModelRequest.messages`` and
``tool_calls``) and middleware read it through ``ctx.messages`` and ``ctx.tool_calls``. Copying it
each time made a turn's cost quadratic in its length. The turn state only ever appends to its
lists in place; the rare edits (``mutate_tool_call``, ``delete_tool_call``, loading history)
replace the list with an edited copy (``pipeline/_turn_state.py``; the memory store's
conversation logs work the same way). So a view that remembers
the list and its length at creation shows exactly what it showed then, for ever, at the cost of
three references.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any, TypeVar, overload

__all__ = ["HistoryView"]

T = TypeVar("T")


class HistoryView(Sequence[T]):
    """A read-only sequence: a fixed head, then the first items of an append-only list.

    It compares equal to any sequence with the same items (a tuple, a list, another view), so
    it reads like the tuples it replaces. It is not hashable.
    """

    __slots__ = ("_head", "_len", "_n", "_tail")

    def __init__(self, head: Sequence[T], tail: list[T]) -> None:
        """View ``head`` followed by the items ``tail`` holds now (later appends are not seen).

        ``head`` is a sequence that does not change: a tuple, another view, or a conversation's
        history as its store loads it (``pipeline/stores/_conversation.py``).
        """
        self._head = head
        self._tail = tail
        self._n = len(tail)
        self._len = len(head) + self._n

    def __len__(self) -> int:
        """The number of items seen."""
        return self._len

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        """An item, or a tuple of the items a slice selects."""
        head = self._head
        if type(index) is int:
            if index < 0:
                index += self._len
                if index < 0:
                    raise IndexError("history index out of range")
            if index < len(head):
                return head[index]
            index -= len(head)
            if index >= self._n:
                raise IndexError("history index out of range")
            return self._tail[index]
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if not head and step == 1:
                return tuple(self._tail[start:stop])
            return tuple(self[i] for i in range(start, stop, step))
        raise TypeError(f"history indices must be int or slice, not {type(index).__name__}")

    def __iter__(self) -> Iterator[T]:
        """The items, oldest first."""
        if self._head:
            return chain(self._head, islice(self._tail, self._n))
        return islice(self._tail, self._n)

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence (not a str) holding the same items in the same order."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compares by content, like a list

    def __repr__(self) -> str:
        """Show the items like a tuple does."""
        return f"HistoryView({tuple(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and deepcopy) as a plain tuple of the items."""
        return (tuple, (tuple(self),))


HistoryView.__module__ = "pipeline.models"
