"""Checks shared by `DurableTurnRunner` and `DurableClient`, and the lazy ``dbos`` import."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .._extras import import_extra
from .._ids import new_id
from .._stash import Stash
from ._errors import DurableConfigError, GateNotWaitingError

__all__ = [
    "STORE_API",
    "check_options",
    "check_patterns",
    "check_turn",
    "check_waiting",
    "load_dbos",
]

STORE_API = (
    "save_turn",
    "save_message",
    "save_tool_call",
    "delete_tool_call",
    "load_conversation",
)


def load_dbos() -> Any:
    """Import ``dbos`` (the ``durable`` extra), or raise `MissingExtraError` saying how."""
    return import_extra("dbos", "durable", "durable turns")


def check_options(
    system_database: object, queue: object, concurrency: object, poll: object, app: object
) -> None:
    """Check the options a runner and a client share.

    Raises:
        DurableConfigError: naming the bad option.
    """
    if not isinstance(system_database, str) or not system_database.startswith(
        ("sqlite:///", "postgresql://", "postgresql+psycopg://", "postgres://")
    ):
        raise DurableConfigError(
            "system_database must be a sqlite:///... or postgresql://... URL, "
            f"got {system_database!r}"
        )
    if not isinstance(queue, str) or not queue.strip() or queue.startswith("_dbos_"):
        raise DurableConfigError(f"queue must be a non-empty name, got {queue!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise DurableConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 < poll <= 60:
        raise DurableConfigError(f"poll_interval must be in (0, 60] seconds, got {poll!r}")
    if not isinstance(app, str) or not app:
        raise DurableConfigError(f"app_name must be a non-empty string, got {app!r}")


def check_patterns(patterns: object) -> tuple[str, ...]:
    """Check a collection of tool-name globs.

    Raises:
        DurableConfigError: it is a string or holds anything but non-empty strings.
    """
    if isinstance(patterns, str | bytes) or not isinstance(patterns, Collection):
        raise DurableConfigError(f"rerun_interrupted must be a list of globs, got {patterns!r}")
    found = tuple(patterns)
    if not all(isinstance(p, str) and p for p in found):
        raise DurableConfigError(f"rerun_interrupted must hold non-empty globs, got {found!r}")
    return found


def check_turn(
    input: object,
    conversation_id: object,
    stash: Mapping[str, Any] | None,
    turn_id: object,
) -> tuple[str, dict[str, Any] | None]:
    """Check a turn's arguments before it is queued; return its id and plain stash."""
    if not isinstance(input, str):
        raise TypeError(f"input must be a string, got {type(input).__name__}")
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise TypeError("conversation_id must be a non-empty string or None")
    if turn_id is not None and (not isinstance(turn_id, str) or not turn_id or ":" in turn_id):
        raise TypeError("turn_id must be a non-empty string without ':' or None")
    plain = None if stash is None else Stash(stash).all()
    return turn_id if isinstance(turn_id, str) else new_id("turn"), plain


def check_waiting(gate_id: str, event: object) -> None:
    """Raise `GateNotWaitingError` unless ``event`` says the turn waits on ``gate_id``."""
    if (
        not isinstance(event, Mapping)
        or event.get("gate_id") != gate_id
        or event.get("state") != "waiting"
    ):
        raise GateNotWaitingError(f"no turn is waiting on gate {gate_id!r}", gate_id=gate_id)


