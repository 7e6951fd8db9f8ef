"""Typed, pre-parsed stash keys for the counts built-ins keep on the hot path."""

from __future__ import annotations

from pipeline import StashKey, is_tool_name

__all__ = ["INVALID_NAME", "CountKeys"]

INVALID_NAME = "(invalid name)"
"""The path segment that stands for every name no tool could have (see `CountKeys`)."""

_MAX_KEYS = 4096


class CountKeys:
    """A bounded memo of ``StashKey[int]`` (default 0) at ``<prefix><name><suffix>``.

    Paths that depend on a tool name are parsed once per name instead of on every call; the
    memo only depends on configuration, never on a turn, so one instance serves every turn.
    A name no tool could have (`is_tool_name` is false: a model made it up) maps to the
    `INVALID_NAME` segment, so no proposed name can make a malformed or nested path.
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
            segment = name if is_tool_name(name) else INVALID_NAME
            path = self._prefix + segment + self._suffix
            key = self._keys[name] = StashKey[int](path, default=0)
        return key

