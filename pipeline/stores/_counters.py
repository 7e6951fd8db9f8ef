"""The `CounterStore` protocol: counts that outlive a turn, shared by every worker of a store.

A limit that spans turns (a conversation's, a customer's, a time window's) cannot live in one
turn's stash, nor in one process: it lives in the turn store. A count is a set of *slots* under
a counter name. A slot is first *reserved* (it counts while it is live, until its expiry) and
then *consumed* (it counts for good, or until it leaves the window) or *released* (it is gone).
Reserving is atomic across processes: a store grants a slot only while the slots consumed in
the window plus the live reservations are below the limit, so parallel workers never grant
more than the limit between them. A reservation whose worker died (never settled) stops
counting when it expires, and a slot is one row per counter: consuming it late counts it once.

`MemoryCounters` is the in-process implementation `MemoryStore` uses; `SqliteStore` and
`PostgresStore` keep the slots in a table of their own (``counter_slots``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["CounterLimit", "CounterStore", "MemoryCounters", "SlotGrant"]


@dataclass(frozen=True, slots=True)
class CounterLimit:
    """One counter a slot is reserved under, its limit and its rolling window.

    Example: ``CounterLimit("loopware.limit|key:cust-7|refund", 3, window=86400.0)``.
    """

    counter: str
    """The counter's name (a policy derives it from its namespace, scope key and tool)."""
    limit: int
    """The most slots the counter may hold at once (consumed in the window plus live ones)."""
    window: float | None = None
    """Seconds a consumed slot keeps counting (a rolling window); None: for ever."""


@dataclass(frozen=True, slots=True)
class SlotGrant:
    """What a store answered to `CounterStore.reserve_slot`."""

    granted: bool
    """True when the slot was reserved (under every counter asked), False when refused."""
    counts: tuple[int, ...]
    """For each counter asked, in order, the slots it held before this one (consumed in the
    window plus live reservations; the reserving slot's own rows never count)."""
    refused_by: int | None = None
    """The index of the first counter that was at its limit (None when granted)."""


@runtime_checkable
class CounterStore(Protocol):
    """A store that keeps counts of slots atomically, across turns, restarts and processes.

    ``now`` is seconds since the epoch, given by the caller (the policy's clock), so a test can
    move time by hand; every party sharing a store must use a clock that agrees with the others
    to within far less than the windows and expiries they use.
    """

    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """Reserve ``slot`` under every counter of ``limits``, or under none (atomically).

        Granted only when each counter holds fewer slots than its limit: those consumed within
        its window before ``now`` plus reservations live at ``now``. A granted slot is live
        until ``now + ttl`` unless settled first; ``ttl=None`` consumes it at once.

        Reserving a slot that still holds (live or consumed) under every counter grants it
        again and renews a live one's expiry, whatever the counts: a call re-run by a durable
        worker (same slot id) keeps its slot, and a retried reservation takes no second one.
        """
        ...

    async def settle_slot(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """Consume ``slot`` under ``counters`` (it counts ``amount``), or release it (gone).

        Consuming a slot whose reservation expired, or was never made, records it consumed at
        ``now``: a call that ran counts, and counts once. Releasing an unknown slot does nothing.
        """
        ...

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """What ``counter`` holds at ``now``: amounts consumed in the window plus live slots."""
        ...


class MemoryCounters:
    """`CounterStore` in process memory: atomic because it never suspends (one event loop).

    Per counter, per slot: ``[amount, at, expires_at]`` (``expires_at`` None once consumed).
    """

    __slots__ = ("_slots",)

    def __init__(self) -> None:
        """Start with no counts."""
        self._slots: dict[str, dict[str, list[float | None]]] = {}

    def __repr__(self) -> str:
        """Show how many counters hold slots."""
        return f"MemoryCounters(counters={len(self._slots)})"

    def _held(self, counter: str, slot: str | None, window: float | None, now: float) -> int:
        """Prune what no longer counts under ``counter``; return what the others hold."""
        rows = self._slots.get(counter)
        if not rows:
            return 0
        held = 0
        for other, (amount, at, expires_at) in list(rows.items()):
            if expires_at is not None:
                if expires_at <= now:
                    del rows[other]  # an expired reservation: its worker never settled it
                elif other != slot:
                    held += 1
            elif window is not None and at is not None and at <= now - window:
                del rows[other]  # consumed, out of the window
            elif other != slot and amount is not None:
                held += int(amount)
        return held

    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """See `CounterStore.reserve_slot`."""
        return self.reserve_now(slot, limits, now=now, ttl=ttl)

    def reserve_now(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """`reserve_slot` without a coroutine (it never suspends)."""
        counts = tuple(self._held(lim.counter, slot, lim.window, now) for lim in limits)
        expires_at = None if ttl is None else now + ttl
        held = [self._slots.get(lim.counter, {}).get(slot) for lim in limits]
        if all(row is not None for row in held):  # the same call again: it keeps its slot
            for row in held:
                if row is not None and row[2] is not None:
                    row[2] = expires_at
            return SlotGrant(True, counts)
        for index, (lim, count) in enumerate(zip(limits, counts, strict=True)):
            if count >= lim.limit:
                return SlotGrant(False, counts, index)
        for lim in limits:
            rows = self._slots.setdefault(lim.counter, {})
            if slot not in rows:
                rows[slot] = [1, now, expires_at]
        return SlotGrant(True, counts)

    async def settle_slot(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """See `CounterStore.settle_slot`."""
        self.settle_now(slot, counters, consume=consume, now=now, amount=amount)

    def settle_now(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """`settle_slot` without a coroutine (it never suspends)."""
        for counter in counters:
            rows = self._slots.get(counter)
            if not consume:
                if rows is not None:
                    rows.pop(slot, None)
                continue
            if rows is None:
                rows = self._slots[counter] = {}
            row = rows.get(slot)
            if row is None:
                rows[slot] = [amount, now, None]
            else:
                row[0] = amount
                row[2] = None

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """See `CounterStore.count_slots`."""
        return self._held(counter, None, window, now)


for _cls in (CounterLimit, SlotGrant, CounterStore):
    _cls.__module__ = "pipeline.stores"
