"""`ToolMethod`: one artifact query method offered to the model as a tool.

`DeferredToolMethods` holds an artifact class's built-in ``tool_methods`` until they are first
read: their argument models are pydantic models, and pydantic's model machinery is not loaded
by ``import pipeline`` (docs/architecture.md, "Import time").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["DeferredToolMethods", "ToolMethod", "declared_tool_methods", "default_serialise"]


def default_serialise(value: Any) -> str:
    """Turn a query result into the text the model reads.

    Strings are returned as they are; a list of strings is newline-joined (``"(empty list)"``
    when empty); numbers become their text; everything else (dicts, mixed lists, None, ...) is
    JSON with a two-space indent, non-JSON values (dates from YAML, ...) written with ``str``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if not value:
            return "(empty list)"
        if all(isinstance(item, str) for item in value):
            return "\n".join(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class ToolMethod:
    """An artifact method exposed to the model as a query tool."""

    name: str
    """Model-facing tool name, e.g. ``"artifact_head"``."""

    method: str | Callable[..., Any]
    """The artifact method: its attribute name, or a callable taking the artifact first."""

    description: str
    """What the tool does, as the model reads it."""

    args_schema: type[BaseModel]
    """Pydantic model of the method's own keyword arguments (without ``call_id``)."""

    serialise: Callable[[Any], str] = field(default=default_serialise)
    """Turns the method's return value into the tool's text result."""

    capped: Callable[..., str] | None = None
    """Renders the result within a byte cap: ``capped(artifact, cap, **kwargs)`` returns the text.

    Forged tools call it instead of the method and `serialise` when it is set, with ``cap`` the
    artifact class's ``max_result_bytes``, so a long result is built within the cap as it
    streams (with a note saying how to read the rest) instead of whole and then cut. Without it,
    the serialised text is cut to the cap afterwards."""

    time_limit: Callable[[Any], float] | None = None
    """Seconds a call may take on a given artifact (a cheap function of it), or None: no limit.

    Forged tools run every query in a worker thread; with a limit, the call ends with an
    `InvalidToolArgsError` once that much wall-clock time (and a short grace) has passed, even
    when the thread is still at work. A thread cannot be stopped from outside, so the method
    should stop by itself too, as ``grep`` does at its own deadline."""

    def bind(self, artifact: object) -> Callable[..., Any]:
        """Return the method bound to ``artifact``."""
        method = self.method
        if isinstance(method, str):
            bound: Callable[..., Any] = getattr(artifact, method)
            return bound

        def call(**kwargs: Any) -> Any:
            return method(artifact, **kwargs)

        return call


class DeferredToolMethods:
    """A class's ``tool_methods``, built by ``build`` when first read and then kept.

    Set on an artifact class in place of the tuple (``Cls.tool_methods = DeferredToolMethods(
    build)``): reading ``Cls.tool_methods`` (or the attribute through a subclass or an instance)
    returns the built tuple, the same object every time.
    """

    __slots__ = ("_build", "_methods")

    def __init__(self, build: Callable[[], tuple[ToolMethod, ...]]) -> None:
        """Keep ``build`` until the methods are first read."""
        self._build = build
        self._methods: tuple[ToolMethod, ...] | None = None

    def resolve(self) -> tuple[ToolMethod, ...]:
        """Return the methods, building them on the first call."""
        methods = self._methods
        if methods is None:
            methods = self._methods = self._build()
        return methods

    def __get__(self, instance: object, owner: type | None = None) -> tuple[ToolMethod, ...]:
        """Return the methods (class and instance reads alike)."""
        return self.resolve()

    def __repr__(self) -> str:
        """Return the method names once built, else that they are not built yet."""
        if self._methods is None:
            return "<DeferredToolMethods (not built yet)>"
        return f"<DeferredToolMethods {[method.name for method in self._methods]!r}>"


def declared_tool_methods(klass: type) -> tuple[ToolMethod, ...]:
    """Return the ``tool_methods`` ``klass`` itself declares (not inherited), or ``()``."""
    declared: tuple[ToolMethod, ...] | DeferredToolMethods = klass.__dict__.get("tool_methods", ())
    if isinstance(declared, DeferredToolMethods):
        return declared.resolve()
    return declared


ToolMethod.__module__ = "pipeline.artifacts"
