"""`PostgresStore`'s `CounterStore` statements: slots in ``loopware.counter_slots``.

A reservation is one transaction that first takes a transaction-level advisory lock per counter
(in a fixed order, so two reservations never deadlock), then prunes, counts and inserts: under
READ COMMITTED two processes could otherwise both count a free slot and both insert. The lock
is released by the commit. A row is one slot under one counter (``bytea`` like every free text
of the store); ``expires_at`` is the end of a live reservation, NULL once the slot is consumed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._counters import CounterLimit, SlotGrant
from ._postgres_sql import Row, b

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

__all__ = ["count", "reserve", "settle"]

Params = dict[str, Any]

_PRUNE = (
    "DELETE FROM loopware.counter_slots WHERE counter = %(c)s AND ("
    "(expires_at IS NOT NULL AND expires_at <= %(now)s) OR "
    "(expires_at IS NULL AND %(since)s::double precision IS NOT NULL "
    "AND at <= %(since)s::double precision))"
)
_HELD = (
    "SELECT COALESCE(SUM(CASE WHEN expires_at IS NULL THEN amount ELSE 1 END), 0) "
    "FROM loopware.counter_slots WHERE counter = %(c)s AND slot IS DISTINCT FROM %(slot)s "
    "AND (expires_at > %(now)s OR (expires_at IS NULL AND "
    "(%(since)s::double precision IS NULL OR at > %(since)s::double precision)))"
)
_INSERT = (
    "INSERT INTO loopware.counter_slots (counter, slot, amount, at, expires_at) "
    "VALUES (%s, %s, 1, %s, %s) ON CONFLICT (counter, slot) DO NOTHING"
)
_CONSUME = (
    "INSERT INTO loopware.counter_slots (counter, slot, amount, at, expires_at) "
    "VALUES (%s, %s, %s, %s, NULL) "
    "ON CONFLICT (counter, slot) DO UPDATE SET amount = excluded.amount, expires_at = NULL"
)
_RELEASE = "DELETE FROM loopware.counter_slots WHERE counter = %s AND slot = %s"
_OWN = "SELECT count(*) FROM loopware.counter_slots WHERE slot = %s AND counter = ANY(%s)"
_RENEW = (
    "UPDATE loopware.counter_slots SET expires_at = %s WHERE slot = %s AND counter = ANY(%s) "
    "AND expires_at IS NOT NULL"
)


def _lock_key(counter: bytes) -> int:
    """The advisory lock key of a counter: 64 bits of its hash, as a signed bigint."""
    digest = hashlib.blake2b(counter, digest_size=8, person=b"loopware-slots").digest()
    return int.from_bytes(digest, "big", signed=True)


def _params(counter: bytes, slot: bytes | None, window: float | None, now: float) -> Params:
    since = None if window is None else now - window
    return {"c": counter, "slot": slot, "now": now, "since": since}


async def reserve(
    conn: AsyncConnection[Row],
    slot: str,
    limits: Sequence[CounterLimit],
    now: float,
    ttl: float | None,
) -> SlotGrant:
    """Reserve ``slot`` under every counter or none, in one transaction on ``conn``.

    Pipelined: the locks, prunes, counts and the look-up of the slot's own rows go in one
    round trip; the insert and the commit in a second.
    """
    key = b(slot)
    names = [b(lim.counter) for lim in limits]
    expires_at = None if ttl is None else now + ttl
    async with conn.pipeline(), conn.transaction():
        for lock in sorted({_lock_key(name) for name in names}):
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
        queued = []
        for name, lim in zip(names, limits, strict=True):
            params = _params(name, key, lim.window, now)
            await conn.execute(_PRUNE, params)
            queued.append(await conn.execute(_HELD, params))
        own_cursor = await conn.execute(_OWN, (key, names))
        counts = tuple([await _first(cursor) for cursor in queued])
        if await _first(own_cursor) == len(set(names)):
            # the same call again (a durable re-run): it keeps the slot it holds
            await conn.execute(_RENEW, (expires_at, key, names))
            return SlotGrant(True, counts)
        for index, (lim, held) in enumerate(zip(limits, counts, strict=True)):
            if held >= lim.limit:
                return SlotGrant(False, counts, index)
        for name in names:
            await conn.execute(_INSERT, (name, key, now, expires_at))
    return SlotGrant(True, counts)


async def _first(cursor: AsyncCursor[Row]) -> int:
    row = await cursor.fetchone()
    return 0 if row is None else int(row[0])


async def settle(
    conn: AsyncConnection[Row],
    slot: str,
    counters: Sequence[str],
    consume: bool,
    now: float,
    amount: int,
) -> None:
    """Consume ``slot`` under ``counters`` (upsert: counted once), or release it."""
    key = b(slot)
    async with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
        if consume:
            await cur.executemany(_CONSUME, [(b(c), key, amount, now) for c in counters])
        else:
            await cur.executemany(_RELEASE, [(b(c), key) for c in counters])


async def count(
    conn: AsyncConnection[Row], counter: str, window: float | None, now: float
) -> int:
    """What ``counter`` holds at ``now`` (it prunes what no longer counts)."""
    params = _params(b(counter), None, window, now)
    async with conn.pipeline(), conn.transaction():
        await conn.execute(_PRUNE, params)
        return await _first(await conn.execute(_HELD, params))
