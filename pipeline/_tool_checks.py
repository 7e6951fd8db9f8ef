"""Checks of a `Tool`'s parts at construction (`InvalidToolError` naming the field).

Also the error for arguments that are not JSON data.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Final

from .artifacts._artifact import SpooledArtifact
from .errors import InvalidToolArgsError, InvalidToolError

__all__ = [
    "bad",
    "check_description",
    "check_flag",
    "check_handler",
    "check_name",
    "is_tool_name",
    "not_json",
    "resolve_artifact_class",
]

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def bad(tool_name: object, field: str, problem: str) -> InvalidToolError:
    """The `InvalidToolError` for one bad field of a tool."""
    label = f"tool {tool_name!r}" if isinstance(tool_name, str) else "tool"
    return InvalidToolError(f"{label}: {field} {problem}", field=field)


def is_tool_name(name: object) -> bool:
    """True when ``name`` can name a tool: a str matching ``^[A-Za-z0-9_-]{1,64}$``.

    Every tool's name is one (the set every major provider accepts); a name a model made up
    may not be, so code that keys anything by a proposed call's name (a stash path, a metric
    label) checks it first.
    """
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_name(name: object) -> None:
    """A tool name: ``^[A-Za-z0-9_-]{1,64}$``."""
    if not is_tool_name(name):
        raise bad(name, "name", f"must match ^[A-Za-z0-9_-]{{1,64}}$, got {name!r}")


def check_description(tool_name: str, description: object) -> None:
    """A non-blank description."""
    if not isinstance(description, str) or not description.strip():
        raise bad(tool_name, "description", "must be a non-blank string")


def check_flag(tool_name: str, field: str, value: object) -> bool:
    """A real bool (not a truthy value)."""
    if type(value) is not bool:
        raise bad(tool_name, field, f"must be a bool, not {type(value).__name__}")
    return value


def check_handler(tool_name: str, handler: object) -> None:
    """A callable that accepts ``(args, ctx, meta)``."""
    if not callable(handler):
        raise bad(tool_name, "handler", f"must be callable, not {type(handler).__name__}")
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):  # some builtins have no signature: nothing to check
        return
    try:
        signature.bind(None, None, None)
    except TypeError as exc:
        raise bad(tool_name, "handler", f"must accept (args, ctx, meta): {exc}") from exc


def resolve_artifact_class(
    tool_name: str, constructor: Callable[[], type[SpooledArtifact]] | None
) -> type[SpooledArtifact]:
    """Call ``artifact_constructor`` once and check it gave a `SpooledArtifact` subclass."""
    if constructor is None:
        return SpooledArtifact
    if not callable(constructor):
        raise bad(tool_name, "artifact_constructor", "must be a zero-argument callable")
    try:
        made: object = constructor()
    except Exception as exc:
        raise bad(tool_name, "artifact_constructor", f"raised when called: {exc!r}") from exc
    if not (isinstance(made, type) and issubclass(made, SpooledArtifact)):
        raise bad(
            tool_name,
            "artifact_constructor",
            f"must return a SpooledArtifact subclass, returned {made!r}",
        )
    return made


def not_json(tool_name: str, reason: object) -> InvalidToolArgsError:
    """Turn a checksum failure (arguments that are not JSON data) into `InvalidToolArgsError`."""
    errors = [{"type": "json_type", "loc": [], "msg": f"arguments are not JSON data: {reason}"}]
    return InvalidToolArgsError(
        f"invalid arguments for tool {tool_name!r}: {reason}", errors=errors, tool_name=tool_name
    )


is_tool_name.__module__ = "pipeline"
