"""Approval gates: the `GateError` family."""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "GateAbortedError",
    "GateError",
    "GateTimeoutError",
    "InvalidGateResolutionError",
]


class GateError(LoopError):
    """Family: an approval gate was not resolved with a valid value.

    Attributes:
        gate_id: The gate's id, when known.
    """

    code = "E_GATE_ERROR"
    status = 500
    fatal = False
    default_message = "an approval gate failed"
    gate_id: str | None

    def __init__(
        self, message: str | None = None, *, gate_id: str | None = None, **context: Any
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, gate_id=gate_id, **context)


class GateTimeoutError(GateError, TimeoutError):
    """An approval gate was not settled before its timeout.

    Attributes:
        timeout: The gate's timeout in seconds, when known.
    """

    code = "E_TURN_GATE_TIMEOUT"
    status = 408
    default_message = "the gate timed out"
    timeout: float | None

    def __init__(
        self,
        message: str | None = None,
        *,
        gate_id: str | None = None,
        timeout: float | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, gate_id=gate_id, timeout=timeout, **context)


class GateAbortedError(GateError):
    """An approval gate was aborted, directly or by aborting its turn.

    Attributes:
        reason: Why it was aborted, when a reason was given.
    """

    code = "E_TURN_GATE_ABORTED"
    status = 499
    default_message = "the gate was aborted"
    reason: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        gate_id: str | None = None,
        reason: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, gate_id=gate_id, reason=reason, **context)


class InvalidGateResolutionError(GateError):
    """A gate resolution failed the gate's schema; the gate stays open.

    Attributes:
        errors: The validation errors, pydantic-style dicts (``loc``, ``msg``, ``type``, ...).
    """

    code = "E_INVALID_TURN_GATE_RESOLUTION"
    fatal = True
    default_message = "invalid gate resolution"
    errors: list[dict[str, Any]]

    def __init__(
        self,
        message: str | None = None,
        *,
        gate_id: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        errors = [] if errors is None else errors
        super().__init__(message, gate_id=gate_id, errors=errors, **context)
