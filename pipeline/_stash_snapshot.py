"""`StashSnapshot`: the stash as a `TurnResult` holds it, a dict that typed keys can also read."""

from __future__ import annotations

from typing import Any, TypeVar, overload

from ._plain import MISSING
from ._stash_key import StashKey

__all__ = ["StashSnapshot"]

T = TypeVar("T")


class StashSnapshot(dict[str, Any]):
    """A copy of a turn's stash at turn end: a plain ``dict`` that a `StashKey` can index too.

    It is a real ``dict`` (equal to dicts, ``json.dumps``-able, mutable like any copy), so
    ``result.stash["counts"]`` works as before. A typed key reads its dot path, list indexes
    included, and falls back to the key's default, exactly as ``stash[key]`` does during the
    turn, with the value typed ``T``::

        SEARCHES = StashKey[int]("counts.search", default=0)
        result.stash[SEARCHES]  # an int
        SEARCHES in result.stash  # whether something is stored there

    Unlike the live `Stash`, a snapshot belongs to its reader: a container read through a key is
    the snapshot's own (change it and the snapshot changes), just as ``snapshot["a"]["b"]`` is.
    """

    __slots__ = ()

    @overload
    def __getitem__(self, key: StashKey[T], /) -> T: ...

    @overload
    def __getitem__(self, key: str, /) -> Any: ...

    def __getitem__(self, key: StashKey[Any] | str, /) -> Any:
        """Return the value at a typed key's path, or the item named by a plain ``str`` key.

        Raises:
            KeyError: Nothing is stored there (and a typed key has no default).
        """
        if not isinstance(key, StashKey):
            return super().__getitem__(key)
        node = self._lookup(key)
        if node is MISSING:
            if not key.has_default:
                raise KeyError(key.path)
            return key.default
        return node

    def __contains__(self, key: object, /) -> bool:
        """Return whether something (even ``None``) is stored at a typed key's path, or a key."""
        if isinstance(key, StashKey):
            return self._lookup(key) is not MISSING
        return super().__contains__(key)

    def _lookup(self, key: StashKey[Any]) -> Any:
        node: Any = self
        for segment in key.parts:
            if isinstance(node, dict):
                node = node.get(segment, MISSING)
            elif isinstance(node, list) and segment.isascii() and segment.isdigit():
                index = int(segment)
                node = node[index] if index < len(node) else MISSING
            else:
                return MISSING
            if node is MISSING:
                return MISSING
        return node


StashSnapshot.__module__ = "pipeline"
