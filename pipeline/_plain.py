"""Plain data: the values a stash holds, validated and copied in one pass.

Plain data is ``None``, ``bool``, ``int``, ``float``, ``str``, lists and tuples of plain data, and
mappings with ``str`` keys. `to_plain` normalises it to builtin types only (tuples become lists,
mappings plain dicts, scalar subclasses such as ``IntEnum`` members their builtin value), so
`clone` can copy stored data without re-validating it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

from ._frozen import FrozenDict, FrozenList
from .errors import InvalidStashValueError

__all__ = ["CONTAINERS", "MAX_DEPTH", "MISSING", "SCALARS", "Missing", "clone", "to_plain"]


class Missing(enum.Enum):
    """The type of `MISSING`."""

    MISSING = enum.auto()


MISSING: Final = Missing.MISSING
"""Marks an absent value where ``None`` is a legitimate value."""
SCALARS: Final = frozenset({str, int, float, bool, type(None)})
CONTAINERS: Final = frozenset({dict, list})
MAX_DEPTH: Final = 128
"""How deep plain data (and a stash path) may nest: deeper values are refused when stored, so
everything stored can always be copied back out (no `RecursionError` on ``get`` or ``all``)."""


class _BadValueError(Exception):
    """Internal: the reason a value is not plain data, and its path while unwinding."""

    __slots__ = ("reason", "segments")

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = []


def _copy_plain(value: object, active: set[int], depth: int) -> Any:
    """Return a copy of ``value`` as plain data; raise `_BadValueError` if it is not."""
    kind = type(value)
    if kind in SCALARS:
        return value
    if depth >= MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        raise _BadValueError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        marker = id(value)
        if marker in active:
            raise _BadValueError("circular reference")
        active.add(marker)
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _BadValueError(f"dict key {key!r} ({type(key).__name__}) is not a str")
            key = str.__str__(key)
            try:
                copied[key] = (
                    item if type(item) in SCALARS else _copy_plain(item, active, depth + 1)
                )
            except _BadValueError as exc:
                exc.segments.append(key)
                raise
        active.discard(marker)
        return copied
    if isinstance(value, list | tuple):
        marker = id(value)
        if marker in active:
            raise _BadValueError("circular reference")
        active.add(marker)
        items: list[Any] = []
        for index, item in enumerate(value):
            try:
                items.append(
                    item if type(item) in SCALARS else _copy_plain(item, active, depth + 1)
                )
            except _BadValueError as exc:
                exc.segments.append(str(index))
                raise
        active.discard(marker)
        return items
    # bool cannot be subclassed, so these are enum-like subclasses: store the builtin value.
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    raise _BadValueError(f"got {type(value).__name__}")


class _NotFastError(Exception):
    """Internal: the value needs the general path (a subclass, a bad value or a deep nest)."""


_DICT_TYPES: tuple[type[Any], ...] = (dict, FrozenDict)
_LIST_TYPES: tuple[type[Any], ...] = (list, tuple, FrozenList)
_DICTS: Final = frozenset(_DICT_TYPES)
_LISTS: Final = frozenset(_LIST_TYPES)


def _copy_fast(value: Any, depth: int) -> Any:
    """Copy builtin containers of builtin scalars, the common case, without cycle tracking.

    Anything else (a subclass, a non-str key, a foreign type, nesting at the depth limit,
    which a cycle also reaches) raises `_NotFastError`, and `_copy_plain` takes over to name
    the problem exactly. A tool call's frozen arguments are plain by construction.
    """
    if depth >= MAX_DEPTH:
        raise _NotFastError
    if type(value) in _DICTS:
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotFastError
            kind = type(item)
            if kind in SCALARS:
                copied[key] = item
            elif kind in _DICTS or kind in _LISTS:
                copied[key] = _copy_fast(item, depth + 1)
            else:
                raise _NotFastError
        return copied
    items: list[Any] = []
    for item in value:
        kind = type(item)
        if kind in SCALARS:
            items.append(item)
        elif kind in _DICTS or kind in _LISTS:
            items.append(_copy_fast(item, depth + 1))
        else:
            raise _NotFastError
    return items


def to_plain(value: object, path: str) -> Any:
    """Validate ``value`` as plain data and return a copy of it for storage at ``path``.

    Scalars are returned as they are (nothing to copy); containers are copied in the same pass
    that validates them.

    Raises:
        InvalidStashValueError: ``value`` is not plain data; ``path`` on the error names the
            offending part (``path`` joined with the keys and indexes leading to it).
    """
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind in _DICTS or kind in _LISTS:
        try:
            return _copy_fast(value, 0)
        except _NotFastError:
            pass
    try:
        return _copy_plain(value, set(), 0)
    except _BadValueError as exc:
        where = ".".join([path, *reversed(exc.segments)] if path else reversed(exc.segments))
        label = repr(where) if where else "the top level"
        raise InvalidStashValueError(
            f"stash value at {label} is not plain data: {exc.reason}", path=where
        ) from None


def clone(value: Any) -> Any:
    """Copy stored plain data (already validated: only dicts, lists and scalars)."""
    if type(value) is dict:
        return {
            key: clone(item) if type(item) in CONTAINERS else item for key, item in value.items()
        }
    if type(value) is list:
        return [clone(item) if type(item) in CONTAINERS else item for item in value]
    return value
