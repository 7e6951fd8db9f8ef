"""What a counting policy's ``scope=`` and ``window=`` mean, and how its counts reach the store.

A turn-scoped policy counts in the turn's stash and never touches this module's store path. A
policy scoped to the conversation or to a key the user derives from the turn keeps its counts
in the turn's store (`TurnView.store`, a `pipeline.stores.CounterStore`): `ScopedCounts` turns
the turn into a key, names the counters, reserves and settles slots there, and words what the
model and the audit read about a refusal.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypeAlias, cast

from pipeline import TurnContext
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stores import CounterLimit, CounterStore, MemoryStore, SlotGrant

__all__ = [
    "DEFAULT_TTL",
    "Clock",
    "Scope",
    "ScopeKey",
    "ScopedCounts",
    "default_clock",
    "describe_window",
    "scoped_counts",
]

Scope: TypeAlias = Literal["turn", "conversation"] | Callable[[TurnContext], str]
"""What a counting policy counts over: ``"turn"`` (each turn on its own, in its stash),
``"conversation"`` (every turn of the turn's conversation), or a callable that derives a key
from the turn (a customer or tenant id from ``ctx.stash``): every turn with the same key."""
Clock: TypeAlias = Callable[[], float]
"""Seconds since the epoch (``time.time``); a test passes a clock it moves by hand."""

_COUNTING: dict[type, bool] = {}
"""Per store type, whether it is a `CounterStore` (what the protocol check found)."""
_MAX_SEEN = 65536
"""Slot ids a policy remembers having used in this process (then it starts over)."""
DEFAULT_TTL = timedelta(minutes=5)
"""How long an unsettled reservation counts by default (5 minutes)."""


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """Which count a turn uses: the scope's kind, the key, and how the model reads it."""

    kind: Literal["conversation", "turn", "key"]
    """``"conversation"``, ``"key"`` (a user's callable), or ``"turn"`` (a conversation scope
    on a turn without a conversation: it counts that turn alone, in the store)."""
    key: str
    """The conversation id, the derived key, or the turn id."""
    phrase: str
    """How a refusal names it: ``"in this conversation"``, ``"for this customer"``."""


def describe_window(window: timedelta) -> str:
    """A window as a refusal words it: ``"1 day"``, ``"2 hours"``, ``"90 seconds"``."""
    seconds = window.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}" if n == 1 else f"{n} {unit}s"
    n_s = f"{seconds:g}"
    return f"{n_s} second" if seconds == 1 else f"{n_s} seconds"


class ScopedCounts:
    """The store side of one policy's scoped counts (serves every turn).

    Args:
        owner: The policy's class name (for messages).
        namespace: The policy's namespace: the first part of every counter name.
        scope: ``"conversation"`` or a key callable (``"turn"`` never gets here).
        window: The rolling window, or None (counts for ever).
        clock: The clock giving ``now`` to the store.
        reservation_ttl: How long an unsettled reservation counts (a crashed worker's).
        scope_name: What a key names in refusals (``"customer"``: "for this customer").

    Raises:
        InvalidMiddlewareConfigError: a bad option.
    """

    __slots__ = (
        "_key_fn",
        "_namespace",
        "_scope_name",
        "_seen",
        "clock",
        "ttl",
        "window",
        "window_text",
    )

    def __init__(
        self,
        owner: str,
        namespace: str,
        scope: Scope,
        *,
        window: timedelta | None,
        clock: Clock,
        reservation_ttl: timedelta,
        scope_name: str,
    ) -> None:
        """Check and keep the options (see the class docstring)."""
        self._namespace = namespace
        self._seen: dict[str, None] = {}
        self._key_fn: Callable[[TurnContext], str] | None = (
            None if isinstance(scope, str) else scope
        )
        self.window = _seconds(owner, "window", window) if window is not None else None
        """The window in seconds, or None."""
        self.window_text = "" if window is None else f" in the last {describe_window(window)}"
        """The refusal's window phrase (empty without a window)."""
        self.ttl = _seconds(owner, "reservation_ttl", reservation_ttl)
        """Seconds an unsettled reservation counts."""
        if not callable(clock):
            raise InvalidMiddlewareConfigError(
                f"{owner}: clock must be a callable returning seconds, got {clock!r}",
                option="clock",
            )
        self.clock = clock
        """The clock giving ``now``."""
        name: object = scope_name
        if not isinstance(name, str) or not name.strip():
            raise InvalidMiddlewareConfigError(
                f"{owner}: scope_name must be a non-empty string, got {scope_name!r}",
                option="scope_name",
            )
        self._scope_name = scope_name

    def __repr__(self) -> str:
        """Show the scope and window."""
        return f"ScopedCounts({self._namespace!r}, window={self.window}, ttl={self.ttl})"

    def key(self, turn: TurnContext) -> ScopeKey:
        """The turn's count key.

        Raises:
            Exception: whatever the key callable raised; TypeError when it returned no
                non-empty string (the caller refuses the call: a limit never fails open).
        """
        fn = self._key_fn
        if fn is None:
            conversation = turn.conversation_id
            if conversation is None:
                return ScopeKey("turn", turn.turn_id, "in this turn")
            return ScopeKey("conversation", conversation, "in this conversation")
        key: object = fn(turn)  # a user's callable: checked whatever it says it returns
        if not isinstance(key, str) or not key:
            raise TypeError(f"the scope key must be a non-empty str, got {key!r}")
        return ScopeKey("key", key, f"for this {self._scope_name}")

    def counter(self, key: ScopeKey, name: str) -> str:
        """The counter of ``name`` (a tool, ``"*"`` for all) under ``key``."""
        return f"{self._namespace}|{key.kind}:{key.key}|{name}"

    def limits(self, counters: Sequence[tuple[str, int]]) -> list[CounterLimit]:
        """`CounterLimit`s of ``(counter, limit)`` pairs with this policy's window."""
        return [CounterLimit(counter, limit, self.window) for counter, limit in counters]

    @staticmethod
    def store(turn: TurnContext) -> CounterStore:
        """The turn's store as a `CounterStore`.

        Raises:
            TypeError: the turn's store keeps no counts.
        """
        store = turn.store
        counting = _COUNTING.get(type(store))
        if counting is None:  # a protocol isinstance costs microseconds: once per store type
            counting = isinstance(store, CounterStore)
            if len(_COUNTING) < 256:
                _COUNTING[type(store)] = counting
        if not counting:
            raise TypeError(
                f"the turn's store {type(store).__name__} is not a CounterStore "
                "(MemoryStore, SqliteStore and PostgresStore are)"
            )
        return store  # type: ignore[return-value]  # checked above, by its type

    def slot_id(self, name: str) -> str:
        """The slot id of ``name`` (``<turn>/<dispatch>/<iteration>/<call id>``).

        Derived from the turn, so a durable worker re-running the turn reserves the same slot
        and keeps it (`CounterStore.reserve_slot`) instead of taking a second one. A name seen
        before by this process (a custom executor reusing a call id) gets a random suffix: a
        second call never rides on the first one's slot.
        """
        seen = self._seen
        if name in seen:
            return f"{name}/{uuid.uuid4().hex}"
        if len(seen) >= _MAX_SEEN:
            seen.clear()
        seen[name] = None
        return name

    async def reserve(
        self,
        store: CounterStore,
        limits: Sequence[CounterLimit],
        slot: str,
        *,
        hold: bool = True,
    ) -> SlotGrant:
        """Reserve ``slot`` (from `slot_id`) under ``limits`` (consumed at once unless ``hold``)."""
        return await store.reserve_slot(
            slot, limits, now=self.clock(), ttl=self.ttl if hold else None
        )

    async def settle(
        self, store: CounterStore, slot: str, counters: Sequence[str], *, consume: bool
    ) -> None:
        """Consume or release ``slot``; shielded, so an abort never leaves it half-settled.

        `MemoryStore` settles without suspending, so it needs no shield (nor its task).
        """
        settling = store.settle_slot(slot, counters, consume=consume, now=self.clock())
        if type(store) is MemoryStore:
            await settling
        else:
            await asyncio.shield(settling)


def _seconds(owner: str, option: str, value: object) -> float:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidMiddlewareConfigError(
            f"{owner}: {option} must be a positive datetime.timedelta, got {value!r}",
            option=option,
        )
    return value.total_seconds()


def scoped_counts(
    owner: str,
    namespace: str,
    scope: object,
    *,
    window: timedelta | None,
    clock: Clock,
    reservation_ttl: timedelta,
    scope_name: str,
) -> tuple[Scope, ScopedCounts | None]:
    """Check a policy's ``scope`` and ``window``; return the scope and its store side.

    The store side is None for the turn scope (its counts live in the stash). Every counting
    policy checks its scope options here, the one place.

    Raises:
        InvalidMiddlewareConfigError: ``scope`` is not ``"turn"``, ``"conversation"`` or a
            callable; a ``window`` on the turn scope; another bad option (`ScopedCounts`).
    """
    if not (scope in ("turn", "conversation") or (callable(scope) and not isinstance(scope, str))):
        raise InvalidMiddlewareConfigError(
            f"{owner}: scope must be 'turn', 'conversation' or a callable (TurnContext) -> str, "
            f"got {scope!r}",
            option="scope",
        )
    checked = cast("Scope", scope)
    if checked == "turn":
        if window is not None:
            raise InvalidMiddlewareConfigError(
                f"{owner}: window= needs scope='conversation' or a key callable "
                "(a turn-scoped count lives only as long as its turn)",
                option="window",
            )
        return checked, None
    counts = ScopedCounts(
        owner,
        namespace,
        checked,
        window=window,
        clock=clock,
        reservation_ttl=reservation_ttl,
        scope_name=scope_name,
    )
    return checked, counts


def default_clock() -> float:
    """`time.time` (the default clock)."""
    return time.time()
