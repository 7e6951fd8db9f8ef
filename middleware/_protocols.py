"""The typed shapes of middleware and hooks, one Protocol per stage kind.

A middleware is ``async (ctx, call_next) -> None``; a hook is ``(ctx) -> None`` (sync or async)
and runs before ``call_next``. The registration decorators bind their type variables to unions of
these Protocols, so mypy rejects a wrongly shaped function at the decorator line: a dispatch
middleware on a turn stage (the context types are unrelated classes), a sync two-argument
function, a second parameter that is not a `CallNext`, or a wrong return type.

The ``...Method`` variants are the same shapes with the instance as the first parameter: what the
module-level decorators see when they decorate methods of class-based middleware.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

from pipeline import CallNext, DispatchContext, TurnContext

__all__ = [
    "DispatchHook",
    "DispatchHookMethod",
    "DispatchMethodT",
    "DispatchMiddleware",
    "DispatchMiddlewareMethod",
    "DispatchT",
    "TurnHook",
    "TurnHookMethod",
    "TurnMethodT",
    "TurnMiddleware",
    "TurnMiddlewareMethod",
    "TurnT",
]


class TurnMiddleware(Protocol):
    """A turn-stage middleware: ``async def mw(ctx: TurnContext, call_next: CallNext) -> None``."""

    def __call__(self, ctx: TurnContext, call_next: CallNext, /) -> Awaitable[None]:
        """Run around the rest of the stage; await ``call_next()`` exactly once to continue."""
        ...


class DispatchMiddleware(Protocol):
    """A dispatch-stage middleware: ``async def mw(ctx: DispatchContext, call_next) -> None``."""

    def __call__(self, ctx: DispatchContext, call_next: CallNext, /) -> Awaitable[None]:
        """Run around the rest of the stage; await ``call_next()`` exactly once to continue."""
        ...


class TurnHook(Protocol):
    """A one-argument turn-stage hook, sync or async; it runs before ``call_next``."""

    def __call__(self, ctx: TurnContext, /) -> Awaitable[None] | None:
        """React to the turn; the rest of the stage runs after it returns."""
        ...


class DispatchHook(Protocol):
    """A one-argument dispatch-stage hook, sync or async; it runs before ``call_next``."""

    def __call__(self, ctx: DispatchContext, /) -> Awaitable[None] | None:
        """React to the iteration; the rest of the stage runs after it returns."""
        ...


class TurnMiddlewareMethod(Protocol):
    """A turn-stage middleware method: ``async def mw(self, ctx, call_next) -> None``."""

    def __call__(self, instance: Any, ctx: TurnContext, call_next: CallNext, /) -> Awaitable[None]:
        """Run around the rest of the stage for ``instance``."""
        ...


class DispatchMiddlewareMethod(Protocol):
    """A dispatch-stage middleware method: ``async def mw(self, ctx, call_next) -> None``."""

    def __call__(
        self, instance: Any, ctx: DispatchContext, call_next: CallNext, /
    ) -> Awaitable[None]:
        """Run around the rest of the stage for ``instance``."""
        ...


class TurnHookMethod(Protocol):
    """A one-argument turn-stage hook method (``def hook(self, ctx) -> None``, or async)."""

    def __call__(self, instance: Any, ctx: TurnContext, /) -> Awaitable[None] | None:
        """React to the turn for ``instance``."""
        ...


class DispatchHookMethod(Protocol):
    """A one-argument dispatch-stage hook method (``def hook(self, ctx) -> None``, or async)."""

    def __call__(self, instance: Any, ctx: DispatchContext, /) -> Awaitable[None] | None:
        """React to the iteration for ``instance``."""
        ...


TurnT = TypeVar("TurnT", bound=TurnMiddleware | TurnHook)
"""What a turn-stage decorator accepts (and returns unchanged)."""

DispatchT = TypeVar("DispatchT", bound=DispatchMiddleware | DispatchHook)
"""What a dispatch-stage decorator accepts (and returns unchanged)."""

TurnMethodT = TypeVar("TurnMethodT", bound=TurnMiddlewareMethod | TurnHookMethod)
"""What a module-level turn-stage decorator accepts on a class."""

DispatchMethodT = TypeVar("DispatchMethodT", bound=DispatchMiddlewareMethod | DispatchHookMethod)
"""What a module-level dispatch-stage decorator accepts on a class."""


for _cls in (
    TurnMiddleware,
    DispatchMiddleware,
    TurnHook,
    DispatchHook,
    TurnMiddlewareMethod,
    DispatchMiddlewareMethod,
    TurnHookMethod,
    DispatchHookMethod,
):
    _cls.__module__ = "middleware"
