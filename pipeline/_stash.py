"""The stash: a per-turn store of plain data addressed by dot paths.

Paths are non-empty segments joined by ``.`` (``"limits.calls.search"``); a segment of ASCII
digits indexes a list when the container there is a list (``"decisions.0.tool"``), and is an
ordinary key in a dict. Values are plain data: ``None``, ``bool``, ``int``, ``float``, ``str``,
lists and tuples of plain data, and mappings with ``str`` keys.

Choices made here:

- Tuples are stored as lists and mappings as plain dicts, so what comes back is always JSON-like
  plain data and every element stays addressable and settable by path. Subclasses of the scalar
  types (``IntEnum``, ``StrEnum``, ...) are stored as their builtin base value.
- ``set`` copies the value (validating it in the same pass) and ``get`` copies a container it
  returns; only the touched subtree is copied and scalars are never copied, so counters stay
  cheap on the hot path.
- ``set`` creates missing intermediate dicts but never grows a list: a list index must exist.
- Dict keys holding ``.`` are accepted as plain data but cannot be addressed one by one; reach
  them through their parent.
- Values may nest at most 128 levels and paths hold at most 128 segments (deeper input raises
  `InvalidStashValueError`), so whatever is stored can always be copied back out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ._plain import CONTAINERS, MISSING, SCALARS, clone, to_plain
from ._stash_key import StashKey, cached_split, short_repr, split_path
from ._stash_tree import (
    Remembered,
    forget,
    leaves,
    list_index,
    lookup,
    not_a_key,
    path_of,
    refuse_write,
    remember,
)
from .errors import InvalidStashValueError

__all__ = ["Stash", "StashKey"]

T = TypeVar("T")


def _counted(key: StashKey[int] | str, value: object) -> int:
    """The count an `increment` starts from when the stored value is not an int: 0 for none."""
    if value is MISSING:
        return 0
    raise InvalidStashValueError(
        f"cannot increment {path_of(key)!r}: it holds {type(value).__name__}", path=path_of(key)
    )


class Stash:
    """A per-turn store of plain data addressed by dot paths; what middleware share.

    It is not a dict: ``stash["a.b"]`` raises `TypeError` (use `get`); the index form takes a
    typed `StashKey`. Values are copied on the way in and containers on the way out, so no
    caller can change the store except through its methods.
    """

    __slots__ = ("_counters", "_data", "_ended")

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        """Build a stash, optionally seeded with a deep copy of ``initial``.

        Args:
            initial: The seed: a mapping of plain data.

        Raises:
            InvalidStashValueError: ``initial`` is not a mapping, or holds something that is
                not plain data (the error's ``path`` names it).
        """
        self._ended = False
        """True once `finish` ran: every write checks it first and raises."""
        self._counters: dict[object, Remembered] = {}
        """Per key `increment` was given (typed or a path): the dict that holds its value,
        the last segment, the default and the path's segments. One lookup reads a count; a
        write that replaces or removes a dict forgets the counters under it (`_forget`)."""
        if initial is None:
            self._data: dict[str, Any] = {}
        elif not isinstance(initial, Mapping):
            raise InvalidStashValueError(
                f"stash seed must be a mapping, got {type(initial).__name__}", path=""
            )
        else:
            self._data = to_plain(initial, "")

    def _parent(self, parts: Sequence[str]) -> dict[str, Any] | None:
        """The dict that holds the last segment, when every segment before it names a dict.

        The common case of every write (``"counts.search"``) in one short walk; None sends
        the caller to the general path (lists, missing parents, non-containers).
        """
        node: Any = self._data
        for segment in parts[:-1]:
            node = node.get(segment)
            if type(node) is not dict:
                return None
        return node  # type: ignore[no-any-return]  # checked to be a dict above (or the root)

    def _assign(self, parts: Sequence[str], stored: Any, path: str) -> None:
        node: Any = self._data
        last = len(parts) - 1
        for position, segment in enumerate(parts):
            if type(node) is dict:
                if position == last:
                    if type(node.get(segment)) is dict:
                        forget(self._counters, parts)  # a dict replaced: counters under it moved
                    node[segment] = stored
                    return
                child = node.get(segment, MISSING)
                if child is MISSING:
                    child = node[segment] = {}
            else:  # the root is a dict and every child walked through is checked below
                index = list_index(segment, node)
                if index is None:
                    where = ".".join(parts[:position])
                    raise InvalidStashValueError(
                        f"cannot set {path!r}: {where!r} is a list of {len(node)} items and"
                        f" {segment!r} is not one of its indexes",
                        path=path,
                    )
                if position == last:
                    node[index] = stored
                    return
                child = node[index]
            if type(child) not in CONTAINERS:
                where = ".".join(parts[: position + 1])
                raise InvalidStashValueError(
                    f"cannot set {path!r}: {where!r} holds a value of type"
                    f" {type(child).__name__}, not a dict or list",
                    path=path,
                )
            node = child

    def get(self, path: str, default: Any = None) -> Any:
        """Return the value at ``path`` (a copy if it is a container), or ``default``.

        Args:
            path: A dot path.
            default: Returned as is when nothing is stored at ``path``.

        Raises:
            InvalidStashValueError: ``path`` is malformed.
        """
        known = self._counters.get(path) if type(path) is str else None
        if known is not None:  # a path written before: one lookup
            node = known[0].get(known[1], MISSING)
        else:
            parts = cached_split(path) if type(path) is str else None
            node = lookup(self._data, split_path(path) if parts is None else parts)
        if node is MISSING:
            return default
        return clone(node) if type(node) in CONTAINERS else node

    def set(self, path: str, value: Any) -> None:
        """Store a copy of ``value`` at ``path``, creating missing intermediate dicts.

        Args:
            path: A dot path; a digit segment must index an existing list item.
            value: Plain data.

        Raises:
            InvalidStashValueError: ``path`` is malformed or runs through a value that is not a
                container, or ``value`` is not plain data. The store is left unchanged.
        """
        if self._ended:
            refuse_write()
        parts = cached_split(path) if type(path) is str else None
        if parts is None:
            parts = split_path(path)
        stored = to_plain(value, path)
        parent = self._parent(parts)
        if parent is not None:
            if type(parent.get(parts[-1])) is dict:
                forget(self._counters, parts)  # a dict replaced: counters under it moved
            parent[parts[-1]] = stored
        else:
            self._assign(parts, stored, path)

    def has(self, path: str) -> bool:
        """Return whether something, even a falsy value or ``None``, is stored at ``path``.

        Raises:
            InvalidStashValueError: ``path`` is malformed.
        """
        return lookup(self._data, split_path(path)) is not MISSING

    def delete(self, path: str) -> bool:
        """Remove the value at ``path`` (a list item is removed, shifting later items).

        Returns:
            True if something was removed, False if nothing was stored there.

        Raises:
            InvalidStashValueError: ``path`` is malformed.
        """
        if self._ended:
            refuse_write()
        known = self._counters.get(path) if type(path) is str else None
        if known is not None:  # a path written before: one lookup
            removed = known[0].pop(known[1], MISSING)
            if type(removed) is dict:
                forget(self._counters, known[3])  # counters under it are gone
            return removed is not MISSING
        parts = cached_split(path) if type(path) is str else None
        if parts is None:
            parts = split_path(path)
        parent = self._parent(parts)  # dicts all the way: the common case, one short walk
        if parent is None:
            parent = lookup(self._data, parts[:-1])
        if type(parent) is dict:
            removed = parent.pop(parts[-1], MISSING)
            if type(removed) is dict:
                forget(self._counters, parts)  # counters under it are gone
            return removed is not MISSING
        if type(parent) is list:
            index = list_index(parts[-1], parent)
            if index is not None:
                del parent[index]
                return True
        return False

    def keys(self) -> list[str]:
        """Return the path of every leaf, in insertion order (list items by index).

        Empty dicts and lists are not leaves, so they contribute no path.
        """
        out: list[str] = []
        leaves(self._data, "", out)
        return out

    def all(self) -> dict[str, Any]:
        """Return a deep copy of the whole store."""
        copied: dict[str, Any] = clone(self._data)
        return copied

    def increment(self, key: StashKey[int] | str, by: int = 1) -> int:
        """Add ``by`` to the integer at ``key`` (a typed key or a dot path) and return it.

        An absent value counts from the key's default, else 0. One walk of the path, no copy:
        the cheap form of ``update(path, lambda n: n + by, default=0)`` that counters use on
        every iteration.

        Raises:
            InvalidStashValueError: the path is malformed or runs through a non-container, or
                the stored value is not an int.
        """
        if self._ended:
            refuse_write()
        try:
            parent, last, start, _ = self._counters[key]  # the dict holding it, remembered
        except (KeyError, TypeError):  # first use of the path (or unhashable: not a path)
            return self._increment_new(key, by)
        if type(by) is not int:
            raise InvalidStashValueError(
                f"increment step must be an int, got {by!r}", path=path_of(key)
            )
        value = parent.get(last, start)
        if type(value) is not int:
            value = _counted(key, value)
        value += by
        parent[last] = value
        return value

    def _increment_new(self, key: StashKey[int] | str, by: int) -> int:
        """`increment` at a path not remembered yet: remember it, else the general path."""
        known = remember(self._data, self._counters, key)  # remembered from now on
        if type(by) is not int:
            raise InvalidStashValueError(
                f"increment step must be an int, got {by!r}", path=path_of(key)
            )
        if known is None:
            return self._increment_elsewhere(key, by)
        return self.increment(key, by)

    def _increment_elsewhere(self, key: StashKey[int] | str, by: int) -> int:
        """`increment` at a path through a list (or a non-container, which raises)."""
        if isinstance(key, StashKey):
            parts, path, start = key.spec
        else:
            parts, path, start = split_path(key), key, MISSING
        current = lookup(self._data, parts)
        value = (0 if start is MISSING else start) if current is MISSING else current
        if type(value) is not int:
            raise InvalidStashValueError(
                f"cannot increment {path!r}: it holds {type(value).__name__}", path=path
            )
        self._assign(parts, value + by, path)
        return int(value + by)

    def append(self, path: str, value: Any) -> int:
        """Append a copy of ``value`` to the list at ``path`` (created when absent).

        Unlike ``update(path, lambda xs: [*xs, value], default=[])`` this copies only the new
        item, so a list that grows every iteration costs O(1) per append. Returns the new length.

        Raises:
            InvalidStashValueError: ``path`` is malformed, holds something that is not a list,
                or ``value`` is not plain data.
        """
        if self._ended:
            refuse_write()
        known = self._counters.get(path) if type(path) is str else None
        parts: tuple[str, ...] | None = ()
        if known is None:
            parts = cached_split(path) if type(path) is str else None
            if parts is None:
                parts = split_path(path)
        stored = to_plain(value, path)
        if known is None:
            known = remember(self._data, self._counters, path)  # parents created
        if known is not None:  # the common case: one lookup, no second walk
            parent, last = known[0], known[1]
            current = parent.get(last, MISSING)
            if type(current) is list:
                current.append(stored)
                return len(current)
            if current is MISSING:
                parent[last] = [stored]
                return 1
        else:
            assert parts is not None  # split above: nothing was known of the path
            current = lookup(self._data, parts)
        if current is MISSING:
            assert parts is not None
            self._assign(parts, [stored], path)
            return 1
        if type(current) is not list:
            raise InvalidStashValueError(
                f"cannot append to {path!r}: it holds a {type(current).__name__}, not a list",
                path=path,
            )
        current.append(stored)
        return len(current)

    def update(self, path: str, fn: Callable[[Any], T], default: Any = None) -> T:
        """Replace the value at ``path`` with ``fn(current)`` and return the new value.

        ``current`` is the stored value (a copy if it is a container, so ``fn`` may mutate it),
        or ``default`` when nothing is stored. Example:
        ``stash.update("counts.search", lambda n: n + 1, default=0)``.

        Args:
            path: A dot path.
            fn: Computes the new value from the current one.
            default: The current value when nothing is stored at ``path``.

        Returns:
            What ``fn`` returned (the store keeps its own copy).

        Raises:
            InvalidStashValueError: As for `set`; if ``fn`` raises, the store is unchanged.
        """
        if self._ended:
            refuse_write()
        parts = cached_split(path) if type(path) is str else None
        if parts is None:
            parts = split_path(path)
        parent = self._parent(parts)
        if parent is not None:  # the common case: one walk, scalars stored as they are
            last = parts[-1]
            current = parent.get(last, MISSING)
            if current is MISSING:
                current = default
            elif type(current) in CONTAINERS:
                if type(current) is dict:
                    forget(self._counters, parts)  # about to be replaced: counters under it move
                current = clone(current)
            new = fn(current)
            parent[last] = new if type(new) in SCALARS else to_plain(new, path)
            return new
        current = lookup(self._data, parts)
        if current is MISSING:
            current = default
        elif type(current) in CONTAINERS:
            current = clone(current)
        new = fn(current)
        self._assign(parts, to_plain(new, path), path)
        return new

    def __getitem__(self, key: StashKey[T]) -> T:
        """Return the value at a typed key's path (a copy if it is a container).

        Raises:
            KeyError: Nothing is stored there and the key has no default.
            TypeError: ``key`` is not a `StashKey` (a string path belongs to `get`).
        """
        if not isinstance(key, StashKey):
            raise TypeError(not_a_key(key, "get"))
        counter = self._counters.get(key)
        if counter is not None:  # a counter: one lookup
            node = counter[0].get(counter[1], MISSING)
            if type(node) is int:
                return node  # type: ignore[return-value]  # see below
        parts, path, default = key.spec
        node = lookup(self._data, parts)
        if node is MISSING:
            if default is MISSING:
                raise KeyError(path)
            node = default  # the stored default: copied below when it is a container
        return clone(node) if type(node) in CONTAINERS else node  # type: ignore[no-any-return]
        # ^ the stash holds untyped plain data; StashKey[T] is the caller's promise that it is T.

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        """Store a copy of ``value`` at a typed key's path, as `set` does.

        Raises:
            InvalidStashValueError: As for `set`.
            TypeError: ``key`` is not a `StashKey` (a string path belongs to `set`).
        """
        if self._ended:
            refuse_write()
        if not isinstance(key, StashKey):
            raise TypeError(not_a_key(key, "set"))
        self._assign(key.parts, to_plain(value, key.path), key.path)

    def __delitem__(self, key: StashKey[Any]) -> None:
        """Remove the value at a typed key's path.

        Raises:
            KeyError: Nothing is stored there.
            TypeError: ``key`` is not a `StashKey` (a string path belongs to `delete`).
        """
        if self._ended:
            refuse_write()
        if not isinstance(key, StashKey):
            raise TypeError(not_a_key(key, "delete"))
        if not self.delete(key.path):
            raise KeyError(key.path)

    def __contains__(self, key: object) -> bool:
        """Return whether something is stored at a typed key's path.

        Raises:
            TypeError: ``key`` is not a `StashKey` (a string path belongs to `has`).
        """
        if not isinstance(key, StashKey):
            raise TypeError(not_a_key(key, "has"))
        return lookup(self._data, key.parts) is not MISSING

    __iter__ = None
    """A stash is not iterable (it is not a dict): use `keys` or `all`."""

    def finish(self) -> dict[str, Any]:
        """End the stash's turn: make it read-only and return its data, not a copy.

        The turn calls this when it ends and its result takes the data as its snapshot, so a
        turn pays nothing for its stash however large it grew. Afterwards reads still work
        (as copies) and every write raises `InvalidStashValueError`.
        """
        self._ended = True
        return self._data

    def __repr__(self) -> str:
        """Return ``Stash({...})`` with the stored data, abbreviated when large."""
        return f"Stash({short_repr(self._data)})"


Stash.__module__ = "pipeline"
