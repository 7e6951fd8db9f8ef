"""The runner's event bus: typed subscriptions, isolated listeners, awaited async listeners."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from ._events import Event, Log

__all__ = ["EventBus"]

E = TypeVar("E", bound=Event)
Listener = Callable[[Any], object]


class EventBus:
    """Listeners by event type plus catch-all listeners, called in subscription order.

    ``emit`` is synchronous: sync listeners run at once; a listener that returns an awaitable is
    scheduled as a task, added to ``pending`` so the turn can await it before returning. A
    listener that raises is reported as a `Log` warning and never breaks the turn.
    """

    __slots__ = ("_any", "_by_type", "_routes", "_seq", "listening")

    def __init__(self) -> None:
        """Create a bus with no listeners."""
        self._by_type: dict[type[Event], list[tuple[int, Listener]]] = {}
        self._any: list[tuple[int, Listener]] = []
        self._seq = 0
        # per event type, its listeners in subscription order: worked out on the first event
        # of the type, kept until a listener is added or removed
        self._routes: dict[type[Event], tuple[Listener, ...]] = {}
        self.listening = False
        """True when at least one listener is subscribed (lets callers skip building events)."""

    def __repr__(self) -> str:
        """Show how many listeners are subscribed."""
        n = sum(len(v) for v in self._by_type.values()) + len(self._any)
        return f"EventBus(listeners={n})"

    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]:
        """Subscribe ``handler`` to ``event_type`` (and its subclasses); return the unsubscribe."""
        kind: object = event_type
        if not (isinstance(kind, type) and issubclass(kind, Event)):
            raise TypeError(f"on() takes an Event subclass, got {event_type!r}")
        if not callable(handler):
            raise TypeError("on() takes a callable handler")
        self._seq += 1
        entry = (self._seq, handler)
        self._by_type.setdefault(event_type, []).append(entry)
        self.listening = True
        self._routes.clear()

        def unsubscribe() -> None:
            entries = self._by_type.get(event_type)
            if entries is not None and entry in entries:
                entries.remove(entry)
                if not entries:
                    del self._by_type[event_type]
            self._refresh()

        return unsubscribe

    def on_any(self, handler: Callable[[Event], object]) -> Callable[[], None]:
        """Subscribe ``handler`` to every event; return the unsubscribe."""
        if not callable(handler):
            raise TypeError("on_any() takes a callable handler")
        self._seq += 1
        entry = (self._seq, handler)
        self._any.append(entry)
        self.listening = True
        self._routes.clear()

        def unsubscribe() -> None:
            if entry in self._any:
                self._any.remove(entry)
            self._refresh()

        return unsubscribe

    def wants(self, event_type: type[Event]) -> bool:
        """True when a listener would receive an event of ``event_type`` (or on_any)."""
        route = self._routes.get(event_type)
        if route is None:
            route = self._route(event_type)
        return bool(route)

    def _refresh(self) -> None:
        self.listening = bool(self._by_type or self._any)
        self._routes.clear()

    def _route(self, event_type: type[Event]) -> tuple[Listener, ...]:
        """The listeners of ``event_type`` (its own, its bases', every ``on_any``), in order."""
        found: list[tuple[int, Listener]] = []
        for cls in event_type.__mro__:
            entries = self._by_type.get(cls)
            if entries:
                found.extend(entries)
            if cls is Event:
                break
        found.extend(self._any)
        found.sort(key=lambda item: item[0])
        route = self._routes[event_type] = tuple(handler for _, handler in found)
        return route

    def emit(self, event: Event, pending: set[asyncio.Future[Any]] | None = None) -> None:
        """Deliver ``event``; async listeners' tasks are added to ``pending``."""
        if not self.listening:
            return
        route = self._routes.get(type(event))
        if route is None:
            route = self._route(type(event))
        for handler in route:
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    if pending is not None:
                        pending.add(task)
                        task.add_done_callback(
                            partial(self._async_done, ev=event, h=handler, p=pending)
                        )
            except Exception as exc:  # a listener must never break the turn
                self._report(event, handler, exc, pending)

    def _async_done(
        self, task: asyncio.Future[Any], *, ev: Event, h: Listener, p: set[asyncio.Future[Any]]
    ) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._report(ev, h, exc, p)

    def _report(
        self,
        event: Event,
        handler: Listener,
        exc: BaseException,
        pending: set[asyncio.Future[Any]] | None,
    ) -> None:
        if isinstance(event, Log) and event.kind == "listener_error":
            return  # never report a failure to report a failure
        name = getattr(handler, "__qualname__", repr(handler))
        self.emit(
            Log(
                turn_id=event.turn_id,
                level="warning",
                kind="listener_error",
                message=f"listener {name} raised {type(exc).__name__}: {exc}",
                payload={"listener": name, "event": type(event).__name__, "error": repr(exc)},
            ),
            pending,
        )


async def drain(pending: set[asyncio.Future[Any]]) -> None:
    """Await every pending listener task, including ones scheduled while waiting."""
    while pending:
        batch = list(pending)
        pending.difference_update(batch)
        await asyncio.gather(*batch, return_exceptions=True)
