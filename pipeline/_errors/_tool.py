"""A tool call failed: the `ToolError` family."""

from __future__ import annotations

from typing import Any

from ._root import LoopError

__all__ = [
    "InvalidToolArgsError",
    "ToolDownstreamError",
    "ToolError",
    "ToolNotFoundError",
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
