"""Typed, pre-parsed stash keys for the counts built-ins keep on the hot path."""

from __future__ import annotations

from pipeline import Stash, StashKey

__all__ = ["CountKeys", "bump"]

_MAX_KEYS = 4096


class CountKeys:
    """A bounded memo of ``StashKey[int]`` (default 0) at ``<prefix><name><suffix>``.

    Paths that depend on a tool name are parsed once per name instead of on every call; the
    memo only depends on configuration, never on a turn, so one instance serves every turn.
    """

    __slots__ = ("_keys", "_prefix", "_suffix")

    def __init__(self, prefix: str, suffix: str = "") -> None:
        """Memoise keys for ``<prefix><name><suffix>`` (the prefix ends with a dot)."""
        self._prefix = prefix
        self._suffix = suffix
        self._keys: dict[str, StashKey[int]] = {}

    def __repr__(self) -> str:
        """Show the path pattern and how many keys are memoised."""
        return f"CountKeys({self._prefix + '<name>' + self._suffix!r}, keys={len(self._keys)})"

    def __call__(self, name: str) -> StashKey[int]:
        """Return the key of ``<prefix><name><suffix>``."""
        key = self._keys.get(name)
        if key is None:
            if len(self._keys) >= _MAX_KEYS:
                self._keys.clear()
            path = self._prefix + name + self._suffix
            key = self._keys[name] = StashKey[int](path, default=0)
        return key


def bump(stash: Stash, key: StashKey[int]) -> int:
    """Add one to the count at ``key`` and return the new count."""
    return stash.increment(key)
