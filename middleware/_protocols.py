"""The typed shapes of middleware and hooks, one Protocol per stage kind.

A middleware is ``async (ctx, call_next) -> None``; a hook is ``(ctx) -> None`` (sync or async)
and runs before ``call_next``. The registration decorators bind their type variables to unions of
these Protocols, so mypy rejects a wrongly shaped function at the decorator line: a dispatch
middleware on a turn stage (the context types are unrelated classes), a sync two-argument
function, a second parameter that is not a `CallNext`, or a wrong return type.

The ``...Method`` variants are the same shapes with the instance as the first parameter: what the
module-level decorators see when they decorate methods of class-based middleware.

The ``...Decorator`` Protocols are the typed faces of the stage decorators, one per context type
and flavour (functions on a ``Middleware`` set, methods of a class). They hold the overloads of
the bare and the keyword form once, and every stage of that context type reuses them (``tools=``
is a type parameter: ``None`` where a stage cannot filter by tool). They cannot be fewer: a type
variable's bound cannot be a type parameter, so each accepted shape needs its own overloads. A
new stage with a new context type needs its middleware and hook Protocols, their type variables
and two decorator Protocols; a new stage of an existing context type needs none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol, TypeVar, overload

from typing_extensions import TypedDict, Unpack

from pipeline import DispatchContext, TurnContext
from pipeline.calls import ToolCallContext, ToolCallNext
from pipeline.stages import CallNext

__all__ = [
    "DispatchDecorator",
    "DispatchHook",
    "DispatchHookMethod",
    "DispatchMethodDecorator",
    "DispatchMethodT",
    "DispatchMiddleware",
    "DispatchMiddlewareMethod",
    "DispatchT",
    "StageOptions",
    "ToolCallDecorator",
    "ToolCallHook",
    "ToolCallHookMethod",
    "ToolCallMethodDecorator",
    "ToolCallMethodT",
    "ToolCallMiddleware",
    "ToolCallMiddlewareMethod",
    "ToolCallT",
    "ToolsT",
    "TurnDecorator",
    "TurnHook",
    "TurnHookMethod",
    "TurnMethodDecorator",
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


class ToolCallMiddleware(Protocol):
    """A ``tool_call`` middleware: ``async def mw(ctx: ToolCallContext, call_next) -> None``.

    ``await call_next()`` runs the rest of the onion and the handler and returns the record.
    """

    def __call__(self, ctx: ToolCallContext, call_next: ToolCallNext, /) -> Awaitable[None]:
        """Run around one tool execution; deny, respond, or await ``call_next()`` once."""
        ...


class ToolCallHook(Protocol):
    """A one-argument ``tool_call`` hook, sync or async; it runs before the handler."""

    def __call__(self, ctx: ToolCallContext, /) -> Awaitable[None] | None:
        """Look at (or deny, or answer) the call; the handler runs after it unless decided."""
        ...


class ToolCallMiddlewareMethod(Protocol):
    """A ``tool_call`` middleware method: ``async def mw(self, ctx, call_next) -> None``."""

    def __call__(
        self, instance: Any, ctx: ToolCallContext, call_next: ToolCallNext, /
    ) -> Awaitable[None]:
        """Run around one tool execution for ``instance``."""
        ...


class ToolCallHookMethod(Protocol):
    """A one-argument ``tool_call`` hook method (``def hook(self, ctx) -> None``, or async)."""

    def __call__(self, instance: Any, ctx: ToolCallContext, /) -> Awaitable[None] | None:
        """Look at (or decide) the call for ``instance``."""
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

ToolCallT = TypeVar("ToolCallT", bound=ToolCallMiddleware | ToolCallHook)
"""What a ``tool_call`` decorator accepts (and returns unchanged)."""

ToolCallMethodT = TypeVar("ToolCallMethodT", bound=ToolCallMiddlewareMethod | ToolCallHookMethod)
"""What the module-level ``tool_call`` decorator accepts on a class."""

ToolsT = TypeVar("ToolsT", contravariant=True)
"""The type of a stage's ``tools=`` option: ``None`` where the stage cannot filter by tool."""


class StageOptions(TypedDict, total=False):
    """The keyword options of every stage decorator (``tools=`` is typed per stage)."""

    order: int
    """Lower runs outer (default 0); ties keep list position, then registration order."""
    name: str | None
    """The name in ``describe_pipelines()``; by default ``<set name>.<function name>`` on a set
    and ``<ClassName>.<method name>`` on a class."""
    timed: bool | None
    """Emit a ``middleware.timing`` debug log per run; by default the set's ``timed``, and off
    for methods."""


class TurnDecorator(Protocol):
    """A turn stage's decorator on a set, e.g. ``@policy.turn_input(order=1)``."""

    @overload
    def __call__(self, fn: TurnT, /) -> TurnT: ...
    @overload
    def __call__(
        self, fn: None = None, /, **options: Unpack[StageOptions]
    ) -> Callable[[TurnT], TurnT]: ...


class TurnMethodDecorator(Protocol):
    """A turn stage's module-level decorator, for methods, e.g. ``@turn_input(order=1)``."""

    @overload
    def __call__(self, fn: TurnMethodT, /) -> TurnMethodT: ...
    @overload
    def __call__(
        self, fn: None = None, /, **options: Unpack[StageOptions]
    ) -> Callable[[TurnMethodT], TurnMethodT]: ...


class DispatchDecorator(Protocol[ToolsT]):
    """A dispatch stage's decorator on a set, e.g. ``@policy.dispatch_output(tools=[...])``."""

    @overload
    def __call__(self, fn: DispatchT, /) -> DispatchT: ...
    @overload
    def __call__(
        self, fn: None = None, /, *, tools: ToolsT = ..., **options: Unpack[StageOptions]
    ) -> Callable[[DispatchT], DispatchT]: ...


class DispatchMethodDecorator(Protocol[ToolsT]):
    """A dispatch stage's module-level decorator, for methods, e.g. ``@dispatch_output``."""

    @overload
    def __call__(self, fn: DispatchMethodT, /) -> DispatchMethodT: ...
    @overload
    def __call__(
        self, fn: None = None, /, *, tools: ToolsT = ..., **options: Unpack[StageOptions]
    ) -> Callable[[DispatchMethodT], DispatchMethodT]: ...


class ToolCallDecorator(Protocol):
    """The ``tool_call`` decorator on a set, e.g. ``@policy.tool_call(tools=["shell*"])``."""

    @overload
    def __call__(self, fn: ToolCallT, /) -> ToolCallT: ...
    @overload
    def __call__(
        self,
        fn: None = None,
        /,
        *,
        tools: Collection[str] | None = ...,
        **options: Unpack[StageOptions],
    ) -> Callable[[ToolCallT], ToolCallT]: ...


class ToolCallMethodDecorator(Protocol):
    """The module-level ``tool_call`` decorator, for methods, e.g. ``@tool_call(order=-10)``."""

    @overload
    def __call__(self, fn: ToolCallMethodT, /) -> ToolCallMethodT: ...
    @overload
    def __call__(
        self,
        fn: None = None,
        /,
        *,
        tools: Collection[str] | None = ...,
        **options: Unpack[StageOptions],
    ) -> Callable[[ToolCallMethodT], ToolCallMethodT]: ...


for _cls in (
    ToolCallMiddleware,
    ToolCallHook,
    ToolCallMiddlewareMethod,
    ToolCallHookMethod,
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
