"""`CounterStore`: every built-in store reserves, consumes, releases and expires slots alike."""

from __future__ import annotations

import asyncio

from pipeline.stores import CounterLimit, CounterStore, SlotGrant, TurnStore


def counters(store: TurnStore) -> CounterStore:
    assert isinstance(store, CounterStore)
    return store


async def test_every_built_in_store_is_a_counter_store(store: TurnStore) -> None:
    """MemoryStore, SqliteStore and PostgresStore all satisfy the protocol."""
    assert isinstance(store, CounterStore)


async def test_slots_are_granted_up_to_the_limit_and_refused_beyond(store: TurnStore) -> None:
    """Live reservations count: the third of limit 2 is refused, naming the counter."""
    c = counters(store)
    limits = [CounterLimit("n|conversation:c1|refund", 2)]
    first = await c.reserve_slot("a", limits, now=100.0, ttl=60.0)
    second = await c.reserve_slot("b", limits, now=100.0, ttl=60.0)
    third = await c.reserve_slot("c", limits, now=100.0, ttl=60.0)
    assert (first, second) == (SlotGrant(True, (0,)), SlotGrant(True, (1,)))
    assert third == SlotGrant(False, (2,), refused_by=0)


async def test_a_released_slot_is_free_again_and_a_consumed_one_is_not(store: TurnStore) -> None:
    """Release gives the slot back; consume keeps it counted for good."""
    c = counters(store)
    limits = [CounterLimit("k", 1)]
    assert (await c.reserve_slot("a", limits, now=0.0, ttl=60.0)).granted
    await c.settle_slot("a", ["k"], consume=False, now=1.0)
    assert (await c.reserve_slot("b", limits, now=2.0, ttl=60.0)).granted
    await c.settle_slot("b", ["k"], consume=True, now=3.0)
    assert await c.count_slots("k", window=None, now=10_000.0) == 1
    assert not (await c.reserve_slot("c", limits, now=10_000.0, ttl=60.0)).granted


async def test_an_unsettled_reservation_expires_and_its_slot_comes_back_once(
    store: TurnStore,
) -> None:
    """A crashed worker's reservation stops counting at its expiry; one new slot, not two."""
    c = counters(store)
    limits = [CounterLimit("k", 1)]
    assert (await c.reserve_slot("dead", limits, now=0.0, ttl=30.0)).granted
    assert not (await c.reserve_slot("x", limits, now=29.9, ttl=30.0)).granted
    assert (await c.reserve_slot("y", limits, now=30.0, ttl=30.0)).granted
    assert not (await c.reserve_slot("z", limits, now=30.0, ttl=30.0)).granted
    await c.settle_slot("y", ["k"], consume=True, now=31.0)
    assert await c.count_slots("k", window=None, now=1000.0) == 1


async def test_a_late_consume_counts_the_run_once(store: TurnStore) -> None:
    """Consuming a slot after its reservation expired still counts it, exactly once."""
    c = counters(store)
    limits = [CounterLimit("k", 5)]
    assert (await c.reserve_slot("slow", limits, now=0.0, ttl=1.0)).granted
    await c.settle_slot("slow", ["k"], consume=True, now=50.0)
    await c.settle_slot("slow", ["k"], consume=True, now=51.0)  # settled twice: still one
    assert await c.count_slots("k", window=None, now=60.0) == 1


async def test_consumed_slots_leave_a_rolling_window(store: TurnStore) -> None:
    """With a window, a consumed slot stops counting once it is older than the window."""
    c = counters(store)
    day = 86400.0
    limits = [CounterLimit("k", 2, window=day)]
    for slot, now in (("a", 0.0), ("b", 3600.0)):
        assert (await c.reserve_slot(slot, limits, now=now, ttl=60.0)).granted
        await c.settle_slot(slot, ["k"], consume=True, now=now)
    assert not (await c.reserve_slot("c", limits, now=day - 1, ttl=60.0)).granted
    assert (await c.reserve_slot("d", limits, now=day + 1, ttl=60.0)) == SlotGrant(True, (1,))


async def test_a_slot_under_two_counters_is_all_or_nothing(store: TurnStore) -> None:
    """Refused by the second counter, the first keeps no row of it."""
    c = counters(store)
    tool, total = CounterLimit("tool", 5), CounterLimit("total", 1)
    assert (await c.reserve_slot("a", [tool, total], now=0.0, ttl=60.0)).granted
    refused = await c.reserve_slot("b", [tool, total], now=0.0, ttl=60.0)
    assert refused == SlotGrant(False, (1, 1), refused_by=1)
    assert await c.count_slots("tool", window=None, now=1.0) == 1


async def test_reserving_the_same_slot_again_is_idempotent(store: TurnStore) -> None:
    """A retried reservation (a connection that died after the commit) takes no second slot."""
    c = counters(store)
    limits = [CounterLimit("k", 1)]
    assert (await c.reserve_slot("a", limits, now=0.0, ttl=60.0)).granted
    assert (await c.reserve_slot("a", limits, now=0.0, ttl=60.0)).granted
    assert await c.count_slots("k", window=None, now=1.0) == 1


async def test_an_amount_counts_for_its_size(store: TurnStore) -> None:
    """A consumed slot carries an amount (tokens): the count is their sum."""
    c = counters(store)
    await c.settle_slot("u1", ["tokens"], consume=True, now=0.0, amount=700)
    await c.settle_slot("u2", ["tokens"], consume=True, now=1.0, amount=400)
    assert await c.count_slots("tokens", window=None, now=2.0) == 1100
    assert await c.count_slots("tokens", window=1.5, now=2.0) == 400


async def test_concurrent_reservations_never_grant_more_than_the_limit(store: TurnStore) -> None:
    """50 reservations at once on one counter of limit 7: exactly 7 granted."""
    c = counters(store)
    limits = [CounterLimit("k", 7)]
    grants = await asyncio.gather(
        *(c.reserve_slot(f"s{i}", limits, now=0.0, ttl=60.0) for i in range(50))
    )
    assert sum(g.granted for g in grants) == 7
