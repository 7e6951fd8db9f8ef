"""Errors directly under `LoopError`: signals, the executor, limits, aborts, policies and stores."""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "AlreadySignalledError",
    "ExecutorError",
    "IterationLimitError",
    "NackedError",
    "PolicyViolationError",
    "StoreError",
    "TurnAbortedError",
]


class AlreadySignalledError(LoopError):
    """A dispatch was acked or nacked a second time.

    Attributes:
        dispatch_id: The dispatch's id, when known.
    """

    code = "E_LLM_EXECUTION_ALREADY_SIGNALLED"
    status = 500
    fatal = True
    default_message = "the dispatch was already acked or nacked"
    dispatch_id: str | None

    def __init__(
        self, message: str | None = None, *, dispatch_id: str | None = None, **context: Any
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, dispatch_id=dispatch_id, **context)


class NackedError(LoopError):
    """The dispatch was nacked without an explicit error.

    Attributes:
        dispatch_id: The dispatch's id, when known.
    """

    code = "E_NACKED"
    status = 500
    fatal = False
    default_message = "the dispatch was nacked"
    dispatch_id: str | None

    def __init__(
        self, message: str | None = None, *, dispatch_id: str | None = None, **context: Any
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, dispatch_id=dispatch_id, **context)


class ExecutorError(LoopError):
    """The executor raised; the message ends with ``: <cause message>``."""

    code = "E_LLM_EXECUTION_EXECUTOR_ERROR"
    status = 500
    fatal = False
    default_message = "the executor failed"


class IterationLimitError(LoopError):
    """The dispatch reached ``max_iterations``.

    Attributes:
        max_iterations: The limit that was reached, when known.
    """

    code = "E_ITERATION_LIMIT"
    status = 429
    fatal = False
    default_message = "the dispatch reached its iteration limit"
    max_iterations: int | None

    def __init__(
        self, message: str | None = None, *, max_iterations: int | None = None, **context: Any
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, max_iterations=max_iterations, **context)


class TurnAbortedError(LoopError):
    """Raised inside a turn after an abort; classified as an abort, not a failure.

    Attributes:
        turn_id: The aborted turn's id, when known (`TurnResult.raise_for_status` sets it).
        gate_id: The gate that was waiting when the turn was aborted, if any.
        stage: The stage that was running, when known.
    """

    code = "E_TURN_ABORTED"
    status = 499
    fatal = False
    default_message = "the turn was aborted"
    turn_id: str | None
    gate_id: str | None
    stage: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        turn_id: str | None = None,
        gate_id: str | None = None,
        stage: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, turn_id=turn_id, gate_id=gate_id, stage=stage, **context)


class PolicyViolationError(LoopError):
    """A policy (a built-in policy middleware, or a rejected gate) ended a dispatch.

    Attributes:
        policy: The policy's name (``"loopware.limit"``, ``"approval"``...); ``""`` if unnamed.
        details: What the policy saw (tool, call id, counts...); empty when nothing was given.
    """

    code = "E_POLICY_VIOLATION"
    status = 403
    fatal = False
    default_message = "a policy was violated"
    policy: str
    details: dict[str, Any]

    def __init__(
        self,
        message: str | None = None,
        *,
        policy: str = "",
        details: dict[str, Any] | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        details = {} if details is None else details
        super().__init__(message, policy=policy, details=details, **context)


class StoreError(LoopError):
    """The turn store failed to load or save (the turn cannot promise durability)."""

    code = "E_STORE_ERROR"
    status = 503
    fatal = False
    default_message = "the turn store failed"
