"""The stash's tree: walking its dicts and lists, and the paths it remembers.

`Stash` (``pipeline/_stash.py``) keeps plain data in nested dicts and lists; these functions
walk it. `remember` finds the dict that holds a path (creating missing dicts) and keeps it in
the stash's memo, so counters and lists written every iteration take one lookup; `forget` drops
what a write that replaces or removes a dict made stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from ._plain import CONTAINERS, MISSING
from ._stash_key import StashKey, cached_split, split_path
from .errors import InvalidStashValueError

__all__ = [
    "Remembered",
    "forget",
    "leaves",
    "list_index",
    "lookup",
    "not_a_key",
    "path_of",
    "refuse_write",
    "remember",
]

Remembered = tuple[dict[str, Any], str, Any, tuple[str, ...]]
"""What a stash remembers of a path (or key): its parent dict, last segment, default (a key's,
or ``MISSING``) and segments."""

MAX_REMEMBERED = 4096
"""How many paths a stash remembers before it starts again."""


def list_index(segment: str, container: list[Any]) -> int | None:
    """The index ``segment`` names in ``container``, or None (not digits, or out of range)."""
    if segment.isascii() and segment.isdigit():
        index = int(segment)
        if index < len(container):
            return index
    return None


def leaves(node: dict[str, Any] | list[Any], prefix: str, out: list[str]) -> None:
    """Append the path of every leaf under ``node`` to ``out`` (list items by index)."""
    items = node.items() if type(node) is dict else enumerate(node)
    for key, item in items:
        path = f"{prefix}.{key}" if prefix else str(key)
        if type(item) in CONTAINERS:
            leaves(item, path, out)
        else:
            out.append(path)


def lookup(data: dict[str, Any], parts: Sequence[str]) -> Any:
    """The value at ``parts`` under ``data`` (through dicts and list indexes), or ``MISSING``."""
    node: Any = data
    for segment in parts:
        if type(node) is dict:
            node = node.get(segment, MISSING)
            if node is MISSING:
                return MISSING
        elif type(node) is list:
            index = list_index(segment, node)
            if index is None:
                return MISSING
            node = node[index]
        else:
            return MISSING
    return node


def forget(remembered: dict[object, Remembered], parts: Sequence[str]) -> None:
    """Forget the paths at or under ``parts`` (a dict there is replaced or removed).

    Remembered paths run through dicts only, and the stash copies every value it takes, so a
    dict has one path: the paths it held are exactly those under that path.
    """
    if remembered:
        n, under = len(parts), tuple(parts)
        for key in [k for k, r in remembered.items() if r[3][:n] == under]:
            del remembered[key]


def remember(
    data: dict[str, Any], remembered: dict[object, Remembered], key: StashKey[Any] | str
) -> Remembered | None:
    """Find (creating missing dicts) and remember the dict that holds ``key``'s value.

    None when the path runs through a list or a value that is not a container, or a key's
    default is not an int (the caller takes its general path, which reports it).

    Raises:
        InvalidStashValueError: the path is malformed.
    """
    parts: tuple[str, ...] | None
    if isinstance(key, StashKey):
        parts, _, start = key.spec  # an int default needs no copy
    else:
        parts = cached_split(key) if type(key) is str else None
        start = MISSING
    if parts is None:
        parts = split_path(key)
    if start is not MISSING and type(start) is not int:
        return None
    node: Any = data  # the root, and each child below, is checked to be a dict
    for segment in parts[:-1]:
        child = node.get(segment, MISSING)
        if child is MISSING:
            child = node[segment] = {}
        elif type(child) is not dict:
            return None
        node = child
    found = (node, parts[-1], start, parts)
    if len(remembered) >= MAX_REMEMBERED:
        remembered.clear()
    remembered[key] = found
    return found


def path_of(key: object) -> str:
    """The path a key or path names (for error messages)."""
    return key.path if isinstance(key, StashKey) else str(key)


def refuse_write() -> NoReturn:
    """Raise: the turn has ended and its stash is read-only."""
    raise InvalidStashValueError(
        "the turn has ended: its stash is read-only (read the result's stash instead)", path=""
    )


def not_a_key(key: object, method: str) -> str:
    """Why ``key`` cannot index a stash, and what to call instead."""
    if isinstance(key, str):
        call = f"stash.{method}({key!r}, value)" if method == "set" else f"stash.{method}({key!r})"
        return f"a Stash is not a dict: instead of stash[{key!r}] use {call}, or a StashKey"
    return f"Stash indices must be StashKey objects, not {type(key).__name__}; use stash.{method}()"
