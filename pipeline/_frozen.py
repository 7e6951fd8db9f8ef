"""Read-only JSON containers: how a `ToolCall` keeps its arguments and a `Tool` its description.

`freeze_json` copies JSON data into `FrozenDict` / `FrozenList`, subclasses of ``dict`` and
``list`` whose mutating methods raise `TypeError`. Being real ``dict`` and ``list`` instances,
they compare equal to plain data, serialise with ``json.dumps``, validate with pydantic, and
``copy.deepcopy`` / ``pickle`` round-trip them; they are simply never changed in place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze_json", "thaw_json"]


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only")


class FrozenDict(dict[str, Any]):
    """A ``dict`` whose mutating methods raise `TypeError`."""

    __slots__ = ()

    # Each mutator is replaced by one that raises.
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        """Rebuild from a plain copy (``copy``, ``deepcopy`` and ``pickle`` use this)."""
        return (type(self), (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` whose mutating methods raise `TypeError`."""

    __slots__ = ()

    # Each mutator is replaced by one that raises.
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[Any]]]:
        """Rebuild from a plain copy (``copy``, ``deepcopy`` and ``pickle`` use this)."""
        return (type(self), (list(self),))


_LEAVES = frozenset({str, int, float, bool, type(None)})


class _NotJSONError(TypeError):
    """Internal: carries the reason and, while unwinding, the path segments (innermost first)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str | int] = []


def _freeze(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        for key, item in value.items():  # a flat object of JSON scalars is copied in one go
            if type(key) is not str or type(item) not in _LEAVES:
                break
        else:
            return FrozenDict(value)
    if kind is dict or (kind is not FrozenDict and isinstance(value, Mapping)):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise _NotJSONError(f"key {key!r} is not a string")
            if type(item) in _LEAVES:
                out[key] = item
                continue
            try:
                out[key] = _freeze(item)
            except _NotJSONError as exc:
                exc.segments.append(key)
                raise
        return FrozenDict(out)
    if kind is list or kind is tuple:
        frozen: list[Any] = []
        for index, item in enumerate(value):
            if type(item) in _LEAVES:
                frozen.append(item)
                continue
            try:
                frozen.append(_freeze(item))
            except _NotJSONError as exc:
                exc.segments.append(index)
                raise
        return FrozenList(frozen)
    if kind in _LEAVES or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, str | int | float | list | tuple):
        # subclasses: str/int enums are JSON by value; list/tuple subclasses are arrays
        return FrozenList(_freeze(list(value))) if isinstance(value, list | tuple) else value
    raise _NotJSONError(f"{type(value).__name__} is not JSON data")


def freeze_json(value: Any, path: str = "$") -> Any:
    """Return a read-only copy of JSON data (mappings and lists/tuples at any depth).

    Already-frozen containers are returned as they are (they are frozen all the way down).

    Args:
        value: JSON data: ``None``, ``bool``, ``int``, ``float``, ``str``, lists or tuples of
            JSON data, and mappings with ``str`` keys.
        path: The name of ``value`` in error messages.

    Raises:
        TypeError: something in ``value`` is not JSON data; the message names its path.
    """
    try:
        return _freeze(value)
    except _NotJSONError as exc:
        where = path + "".join(
            f"[{segment}]" if isinstance(segment, int) else f".{segment}"
            for segment in reversed(exc.segments)
        )
        raise TypeError(f"{where}: {exc.reason}") from None


def slot_setters(cls: type, *names: str) -> tuple[Callable[[object, object], None], ...]:
    """The setters of a frozen, slotted class's fields ``names``, in that order.

    The hot path fills new frozen records through them: each is the slot's own descriptor, a
    third cheaper than ``object.__setattr__``, which looks the attribute up again every time.
    """
    return tuple(cls.__dict__[name].__set__ for name in names)


def thaw_json(value: Any) -> Any:
    """Return an editable copy of JSON data: every dict and list (read-only or not) copied."""
    if isinstance(value, dict):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw_json(item) for item in value]
    return value
