"""Validation of built-in middleware options: bad options raise at construction, never later."""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

from pipeline.errors import InvalidMiddlewareConfigError

__all__ = ["check_bool", "check_choice", "check_int", "check_names", "check_namespace"]

_C = TypeVar("_C", bound=str)


def check_namespace(owner: str, namespace: object) -> str:
    """Return ``namespace`` if it is a valid stash dot path (non-empty segments).

    Raises:
        InvalidMiddlewareConfigError: it is not a string or has an empty segment.
    """
    if not isinstance(namespace, str) or not namespace or not all(namespace.split(".")):
        raise InvalidMiddlewareConfigError(
            f"{owner}: namespace must be a stash path like 'loopware.counter', got {namespace!r}",
            option="namespace",
        )
    return namespace


def check_int(owner: str, option: str, value: object, *, minimum: int | None) -> int:
    """Return ``value`` if it is an int (not a bool) of at least ``minimum`` (None: any int).

    Raises:
        InvalidMiddlewareConfigError: otherwise.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
    ):
        at_least = "" if minimum is None else f" >= {minimum}"
        raise InvalidMiddlewareConfigError(
            f"{owner}: {option} must be an int{at_least}, got {value!r}", option=option
        )
    return value


def check_bool(owner: str, option: str, value: object) -> bool:
    """Return ``value`` if it is a bool.

    Raises:
        InvalidMiddlewareConfigError: otherwise.
    """
    if not isinstance(value, bool):
        raise InvalidMiddlewareConfigError(
            f"{owner}: {option} must be a bool, got {value!r}", option=option
        )
    return value


def check_choice(owner: str, option: str, value: object, choices: tuple[_C, ...]) -> _C:
    """Return ``value`` if it is one of ``choices``.

    Raises:
        InvalidMiddlewareConfigError: otherwise.
    """
    for choice in choices:
        if value == choice and isinstance(value, str):
            return choice
    raise InvalidMiddlewareConfigError(
        f"{owner}: {option} must be one of {', '.join(map(repr, choices))}; got {value!r}",
        option=option,
    )


def check_names(
    owner: str, option: str, value: object, *, noun: str = "strings"
) -> tuple[str, ...]:
    """Return a collection of non-empty strings (tool names or patterns) as a tuple.

    A bare string is refused: ``exempt="poll"`` would otherwise mean the letters of ``"poll"``.
    ``noun`` names the strings in messages (``"tool names"``).

    Raises:
        InvalidMiddlewareConfigError: not a collection, a bare string, or an item that is not a
            non-empty string.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise InvalidMiddlewareConfigError(
            f"{owner}: {option} must be a collection of {noun} (e.g. a list), got {value!r}",
            option=option,
        )
    for item in value:
        if not isinstance(item, str) or not item:
            raise InvalidMiddlewareConfigError(
                f"{owner}: {option} must hold non-empty {noun}, got {item!r}", option=option
            )
    return tuple(value)
