"""`GatewayConfigError` and the checks every table of the gateway configuration shares."""

from __future__ import annotations

from typing import Any

__all__ = ["GatewayConfigError", "bad", "count", "seconds", "strings", "table"]


class GatewayConfigError(ValueError):
    """The configuration file is unreadable or has a bad key (the message names it)."""


def bad(key: str, problem: str) -> GatewayConfigError:
    """The error for ``key`` and what is wrong with it."""
    return GatewayConfigError(f"{key}: {problem}")


def strings(key: str, value: object) -> tuple[str, ...]:
    """A list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise bad(key, "must be a list of non-empty strings")
    return tuple(value)


def seconds(key: str, value: object) -> float:
    """A positive number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise bad(key, f"must be a positive number of seconds, got {value!r}")
    return float(value)


def table(key: str, value: object) -> dict[str, Any]:
    """A TOML table."""
    if not isinstance(value, dict):
        raise bad(key, "must be a table")
    return value


def count(key: str, value: object, minimum: int = 0) -> int:
    """A whole number of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad(key, f"must be a whole number >= {minimum}, got {value!r}")
    return value
