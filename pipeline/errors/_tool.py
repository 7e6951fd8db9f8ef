"""A tool call failed: the `ToolError` family."""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "ArgumentsLockedError",
    "CallDeniedError",
    "CallRejectedError",
    "InvalidToolArgsError",
    "ToolDownstreamError",
    "ToolError",
    "ToolNotFoundError",
    "ToolUnavailableError",
]


class ToolError(LoopError):
    """Family: one tool call failed (its arguments, its tool's name or its handler).

    The model sees these as `ToolCall` records with ``is_error=True``; the turn goes on.

    Attributes:
        tool_name: The tool the call named, when known.
        call_id: The id of the failing call, when known.
    """

    code = "E_TOOL_ERROR"
    status = 500
    fatal = False
    default_message = "a tool call failed"
    tool_name: str | None
    call_id: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        call_id: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(message, tool_name=tool_name, call_id=call_id, **context)


class InvalidToolArgsError(ToolError, ValueError):
    """Arguments failed the tool's input schema.

    Attributes:
        errors: The field errors, pydantic-style dicts (``loc``, ``msg``, ``type``, ...).
        field: The bad argument, when an artifact query method names a single one.
    """

    code = "E_INVALID_TOOL_ARGS"
    status = 422
    default_message = "invalid tool arguments"
    errors: list[dict[str, Any]]
    field: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        errors: list[dict[str, Any]] | None = None,
        field: str | None = None,
        tool_name: str | None = None,
        call_id: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        errors = [] if errors is None else errors
        super().__init__(
            message, tool_name=tool_name, call_id=call_id, errors=errors, field=field, **context
        )


class ToolNotFoundError(ToolError, LookupError):
    """A call named a tool that is not in the turn's registry; ``tool_name`` names it."""

    code = "E_TOOL_NOT_FOUND"
    status = 404
    default_message = "tool not found"

    def __str__(self) -> str:
        """Return ``"CODE: message"`` (not LookupError's quoted form)."""
        return f"{self.code}: {self.message}"


class ToolDownstreamError(ToolError):
    """A tool handler raised; ``__cause__`` is the original exception.

    Attributes:
        line: The 1-based line of the artifact content that failed to parse, when known.
        format: The format an artifact failed to parse as (``"JSON"``, ``"yaml"``...), if any.
    """

    code = "E_TOOL_DOWNSTREAM_ERROR"
    default_message = "tool handler failed"
    line: int | None
    format: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        tool_name: str | None = None,
        call_id: str | None = None,
        line: int | None = None,
        format: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(
            message, tool_name=tool_name, call_id=call_id, line=line, format=format, **context
        )


class ToolUnavailableError(ToolNotFoundError):
    """A call named a tool that a decision took away during the turn (hidden or withdrawn).

    Unlike an unknown name, the model is told that the tool exists and why it may not be
    called any more.

    Attributes:
        policy: Who took the tool away (a middleware namespace such as ``"loopware.limit"``).
        reason: Why, as that policy put it.
    """

    code = "E_TOOL_UNAVAILABLE"
    status = 403
    default_message = "the tool is not available"
    policy: str | None
    reason: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        policy: str | None = None,
        reason: str | None = None,
        tool_name: str | None = None,
        call_id: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(
            message, tool_name=tool_name, call_id=call_id, policy=policy, reason=reason, **context
        )


class CallDeniedError(ToolError):
    """A policy refused one call in the ``tool_call`` stage (or withheld its result).

    Attributes:
        policy: The policy that decided (a middleware namespace or name).
        reason: Why, as the policy put it.
    """

    code = "E_CALL_DENIED"
    status = 403
    default_message = "the call was denied"
    policy: str | None
    reason: str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        policy: str | None = None,
        reason: str | None = None,
        tool_name: str | None = None,
        call_id: str | None = None,
        **context: Any,
    ) -> None:
        """Build the error (see the class docstring for the context keywords)."""
        super().__init__(
            message, tool_name=tool_name, call_id=call_id, policy=policy, reason=reason, **context
        )


class CallRejectedError(CallDeniedError):
    """An approver said no to one call (or its approval timed out or was aborted)."""

    code = "E_CALL_REJECTED"
    default_message = "the call was rejected"


class ArgumentsLockedError(ToolError):
    """A ``tool_call`` hook tried to change arguments that an approver already approved.

    The arguments a handler receives are the ones the approver saw; a hook that replaces them
    after the approval makes the call fail instead (it is not run).
    """

    code = "E_ARGS_LOCKED"
    status = 409
    default_message = "the arguments were approved and can no longer be changed"
