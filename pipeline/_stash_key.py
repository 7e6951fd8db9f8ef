"""`StashKey`: a typed handle on one stash path, and the path syntax both share."""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from ._plain import MAX_DEPTH, MISSING, Missing, clone, to_plain
from .errors import InvalidStashValueError

__all__ = ["StashKey", "short_repr", "split_path"]

T = TypeVar("T")

_repr: Final = reprlib.Repr()
_repr.maxlevel = 4
_repr.maxdict = 8
_repr.maxlist = 8
_repr.maxstring = 40
_repr.maxother = 40


def short_repr(value: object) -> str:
    """An abbreviated repr of stored data (for reprs of stashes and keys)."""
    return _repr.repr(value)


_SPLIT: dict[str, tuple[str, ...]] = {}
"""Paths already split and checked (bounded: cleared when it reaches `_SPLIT_MAX`)."""
cached_split: Final = _SPLIT.get
"""The segments of a dot path split before, else None: the stash's hot paths ask it first
and call `split_path` only on a miss (one call less per access)."""
_SPLIT_MAX = 4096


def split_path(path: object) -> tuple[str, ...]:
    """The segments of a dot path, checked once and cached (middleware reuse a few paths)."""
    if type(path) is str:
        cached = _SPLIT.get(path)
        if cached is not None:
            return cached
    elif not isinstance(path, str):
        raise InvalidStashValueError(f"stash path must be a str, got {type(path).__name__}")
    parts = tuple(path.split("."))
    if "" in parts:
        raise InvalidStashValueError(
            f"malformed stash path {path!r}: the path and every segment must be non-empty",
            path=path,
        )
    if len(parts) > MAX_DEPTH:
        raise InvalidStashValueError(
            f"stash path has {len(parts)} segments, more than {MAX_DEPTH}", path=path
        )
    if len(_SPLIT) >= _SPLIT_MAX:
        _SPLIT.clear()
    _SPLIT[path] = parts
    return parts


class StashKey(Generic[T]):
    """A typed handle on one stash path: ``stash[key]`` is typed ``T``.

    Modelled on pytest's ``StashKey``: build one per purpose, usually at module level, and
    compare by identity. Here a key also names its path and may carry a default::

        SEARCHES = StashKey[int]("counts.search", default=0)
        stash[SEARCHES] += 1

    mypy checks values read and written through the key; nothing is checked at runtime beyond
    the plain-data rule, so a key is a promise about what its path holds. (It is a slotted class
    with read-only properties rather than a frozen dataclass: a frozen, slotted, generic
    dataclass breaks on ``StashKey[int](...)`` in Python 3.11.)
    """

    __slots__ = ("_default", "_parts", "_path", "_segments", "_spec")

    def __init__(self, path: str, default: T | Missing = MISSING) -> None:
        """Build a key for ``path``.

        Args:
            path: The dot path the key addresses.
            default: Returned (as a copy) by ``stash[key]`` when the path is absent; without
                one, reading an absent path raises `KeyError`.

        Raises:
            InvalidStashValueError: The path is malformed or the default is not plain data.
        """
        self._parts = split_path(path)
        self._segments = tuple(self._parts)
        self._path = path
        self._default: Any = MISSING if default is MISSING else to_plain(default, path)
        self._spec = (self._segments, path, self._default)

    @property
    def path(self) -> str:
        """The dot path the key addresses."""
        return self._path

    @property
    def parts(self) -> tuple[str, ...]:
        """The path's segments, in order (``("limits", "calls", "search")``)."""
        return self._segments

    @property
    def spec(self) -> tuple[tuple[str, ...], str, Any]:
        """The key's parts, path and default in one read (what the stash's hot paths use).

        The default is the stored one (not a copy), or ``MISSING``: copy a container before use.
        """
        return self._spec

    @property
    def has_default(self) -> bool:
        """Whether the key carries a default."""
        return self._default is not MISSING

    @property
    def default(self) -> T:
        """A copy of the default.

        Raises:
            LookupError: The key has no default.
        """
        if self._default is MISSING:
            raise LookupError(f"{self!r} has no default")
        return clone(self._default)  # type: ignore[no-any-return]
        # ^ validated plain data; T is the key's promise about it.

    if TYPE_CHECKING:
        # Keys compare by identity (object's __eq__, unchanged at run time). Declaring it tells
        # mypy's strict equality that ``key in result.stash`` (a dict of str keys, see
        # `StashSnapshot`) is a deliberate check, not a non-overlapping container check.
        def __eq__(self, other: object, /) -> bool: ...

        def __hash__(self) -> int: ...

    def __repr__(self) -> str:
        """Return ``StashKey('path')`` or ``StashKey('path', default=...)``."""
        if self._default is MISSING:
            return f"StashKey({self._path!r})"
        return f"StashKey({self._path!r}, default={_repr.repr(self._default)})"


StashKey.__module__ = "pipeline"
