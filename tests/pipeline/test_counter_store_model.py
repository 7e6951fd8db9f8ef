"""`CounterStore` against a model: random interleavings never grant more than the limit.

A Hypothesis state machine reserves new slots, consumes or releases live ones, re-reserves a
held one (a durable re-run), and moves the clock (so reservations whose worker "died" expire,
and consumed slots leave the window). After every step the store's count equals the model's,
and the slots the model holds never exceed the limit; each reservation is granted exactly when
the model says there is room.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pipeline.stores import CounterLimit, CounterStore, MemoryStore, SqliteStore

T = TypeVar("T")
TTL = 10.0
COUNTER = "n|key:cust|refund"


@dataclass
class Slot:
    at: float
    expires_at: float | None  # None once consumed


class CounterMachine(RuleBasedStateMachine):
    """Drives one store and a model of it with the same operations."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store: CounterStore = MemoryStore()
        self.slots: dict[str, Slot] = {}
        self.now = 1000.0
        self.limit = 1
        self.window: float | None = None
        self.serial = 0

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @initialize(
        backend=st.sampled_from(["memory", "sqlite"]),
        limit=st.integers(min_value=1, max_value=4),
        window=st.sampled_from([None, 25.0, 100.0]),
    )
    def open(self, backend: str, limit: int, window: float | None) -> None:
        if backend == "sqlite":
            self.store = SqliteStore(":memory:")
        self.limit = limit
        self.window = window

    def teardown(self) -> None:
        if isinstance(self.store, SqliteStore):
            self.store.close()
        self.loop.close()

    # -- the model --------------------------------------------------------------------------
    def counts(self, slot: Slot) -> bool:
        if slot.expires_at is not None:
            return slot.expires_at > self.now
        return self.window is None or slot.at > self.now - self.window

    def held(self) -> int:
        return sum(self.counts(s) for s in self.slots.values())

    def live(self) -> list[str]:
        return sorted(
            k for k, s in self.slots.items() if s.expires_at is not None and s.expires_at > self.now
        )

    def limits(self) -> list[CounterLimit]:
        return [CounterLimit(COUNTER, self.limit, self.window)]

    # -- rules ------------------------------------------------------------------------------
    @rule()
    def reserve(self) -> None:
        self.serial += 1
        slot = f"s{self.serial}"
        room = self.held() < self.limit
        grant = self.run(self.store.reserve_slot(slot, self.limits(), now=self.now, ttl=TTL))
        assert grant.granted == room, (grant, self.held(), self.limit)
        if grant.granted:
            self.slots[slot] = Slot(self.now, self.now + TTL)

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data(), consume=st.booleans())
    def settle(self, data: st.DataObject, consume: bool) -> None:
        slot = data.draw(st.sampled_from(self.live()))
        self.run(self.store.settle_slot(slot, [COUNTER], consume=consume, now=self.now))
        if consume:
            self.slots[slot].expires_at = None
        else:
            del self.slots[slot]

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def reserve_again(self, data: st.DataObject) -> None:
        """A durable re-run reserves the slot it holds: granted, renewed, never a second one."""
        slot = data.draw(st.sampled_from(self.live()))
        grant = self.run(self.store.reserve_slot(slot, self.limits(), now=self.now, ttl=TTL))
        assert grant.granted
        self.slots[slot].expires_at = self.now + TTL

    @rule(dt=st.sampled_from([0.5, 3.0, 9.99, 10.0, 30.0, 120.0]))
    def tick(self, dt: float) -> None:
        self.now += dt
        for key in [k for k, s in self.slots.items() if not self.counts(s)]:
            del self.slots[key]  # expired reservations and consumed slots out of the window

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def never_more_than_the_limit(self) -> None:
        assert self.held() <= self.limit

    @invariant()
    def the_store_counts_what_the_model_holds(self) -> None:
        count = self.run(self.store.count_slots(COUNTER, window=self.window, now=self.now))
        assert count == self.held()


CounterMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestCounterStoreAgainstItsModel = CounterMachine.TestCase
