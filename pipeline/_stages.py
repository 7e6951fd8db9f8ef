"""The middleware contract shared by the runner and the `middleware` package.

A middleware is ``async (ctx, call_next) -> None``. The runner composes, per stage, an ordered
list of `MiddlewareSpec` values into an onion. Anything passed in ``TurnRunner(middleware=[...])``
resolves to specs in one of two ways:

* it implements `MiddlewareProvider` (``middleware_specs()``), as ``middleware.Middleware`` sets
  do; or
* its class has methods carrying ``__loopware_registrations__``: a tuple of `MethodRegistration`
  objects, each able to ``bind(instance)`` into a spec (what the module-level decorators of the
  ``middleware`` package attach to methods of class-based middleware).

An item may also implement `EventObserver` to subscribe to the runner's events when it is handed
to the runner (``AuditLog`` does: events cannot be skipped by a short-circuiting middleware),
and `RecordKeeper` (``pipeline/_record_keepers.py``) to keep a record of every change to a
turn's stored calls, written durably with the store's write (``AuditLog`` does; see
`RecordKeeper` for the order of the writes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from ._context import TurnContext
    from ._dispatch import DispatchContext
    from ._events import Event
    from .calls._context import ToolCallContext, ToolCallNext

__all__ = [
    "CallNext",
    "DispatchStageFn",
    "EventObserver",
    "EventSource",
    "MethodRegistration",
    "MiddlewareProvider",
    "MiddlewareSpec",
    "Stage",
    "ToolCallStageFn",
    "TurnStageFn",
]

Stage = Literal["turn_input", "dispatch_input", "tool_call", "dispatch_output", "turn_output"]
"""The five middleware stages (``tool_call`` wraps each single tool execution)."""

STAGES: tuple[Stage, ...] = (
    "turn_input",
    "dispatch_input",
    "tool_call",
    "dispatch_output",
    "turn_output",
)

CallNext = Callable[[], Awaitable[None]]
"""The ``call_next`` argument of a middleware: await it to run the rest of the stage."""

TurnStageFn = Callable[["TurnContext", CallNext], Awaitable[None]]
"""A turn-stage middleware: ``async (ctx: TurnContext, call_next) -> None``."""

DispatchStageFn = Callable[["DispatchContext", CallNext], Awaitable[None]]
"""A dispatch-stage middleware: ``async (ctx: DispatchContext, call_next) -> None``."""

ToolCallStageFn = Callable[["ToolCallContext", "ToolCallNext"], Awaitable[None]]
"""A ``tool_call`` middleware: ``async (ctx: ToolCallContext, call_next) -> None``, where
``await call_next()`` runs the rest of the onion and the handler and returns the record."""

E = TypeVar("E", bound="Event")


@dataclass(frozen=True, slots=True)
class MiddlewareSpec:
    """One middleware, ready to compose into a stage."""

    stage: Stage
    """The stage it runs in."""
    name: str
    """Its name in `TurnRunner.describe_pipelines()`."""
    fn: Callable[[Any, Any], Awaitable[None]]
    """The two-argument async callable (already adapted from hooks or sync functions)."""
    order: int = 0
    """Lower runs outer; ties keep list position, then registration order."""
    check: Callable[[Any], object] | None = None
    """The one-argument hook ``fn`` adapts, when ``fn`` is only "run the hook, then
    ``call_next``": the stage then runs it in line, without a layer of its own (what the hook
    returns, if awaitable, is awaited). ``fn`` must do the same; None for a real layer."""


@runtime_checkable
class MiddlewareProvider(Protocol):
    """Something that contributes middleware specs (a ``middleware.Middleware`` set)."""

    def middleware_specs(self) -> Iterable[MiddlewareSpec]:
        """Return this item's specs in registration order."""
        ...


class MethodRegistration(Protocol):
    """A stage registration attached to a method of a class-based middleware."""

    def bind(self, instance: object) -> MiddlewareSpec:
        """Return the spec for this method bound to ``instance``."""
        ...


class EventSource(Protocol):
    """What an `EventObserver` may subscribe to (the runner)."""

    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]:
        """Subscribe to one event type; return the unsubscribe."""
        ...

    def on_any(self, handler: Callable[[Event], object]) -> Callable[[], None]:
        """Subscribe to every event; return the unsubscribe."""
        ...


@runtime_checkable
class EventObserver(Protocol):
    """A middleware item that also observes the runner's events."""

    def observe(self, events: EventSource) -> None:
        """Subscribe to ``events``; called once when the item is handed to a runner."""
        ...


for _cls in (
    MiddlewareSpec,
    MiddlewareProvider,
    MethodRegistration,
    EventSource,
    EventObserver,
):
    _cls.__module__ = "pipeline.stages"
