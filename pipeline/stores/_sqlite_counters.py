"""`SqliteStore`'s `CounterStore` statements: slots in the ``counter_slots`` table.

Each function runs inside one ``BEGIN IMMEDIATE`` transaction of the store (its worker thread),
so the count and the insert of a reservation hold the file's write lock together: two
processes on one file cannot both see a free slot. A row is one slot under one counter;
``expires_at`` is the end of a live reservation, NULL once the slot is consumed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ._counters import CounterLimit, SlotGrant
from ._sqlite_codec import sql_text

__all__ = ["count", "reserve", "settle"]

_PRUNE = (
    "DELETE FROM counter_slots WHERE counter = ? AND ((expires_at IS NOT NULL AND expires_at <= ?)"
    " OR (expires_at IS NULL AND ? IS NOT NULL AND at <= ?))"
)
_HELD = (
    "SELECT COALESCE(SUM(CASE WHEN expires_at IS NULL THEN amount ELSE 1 END), 0) "
    "FROM counter_slots WHERE counter = ? AND slot IS NOT ? "
    "AND (expires_at > ? OR (expires_at IS NULL AND (? IS NULL OR at > ?)))"
)
_INSERT = (
    "INSERT INTO counter_slots (counter, slot, amount, at, expires_at) VALUES (?, ?, 1, ?, ?) "
    "ON CONFLICT (counter, slot) DO NOTHING"
)
_CONSUME = (
    "INSERT INTO counter_slots (counter, slot, amount, at, expires_at) VALUES (?, ?, ?, ?, NULL) "
    "ON CONFLICT (counter, slot) DO UPDATE SET amount = excluded.amount, expires_at = NULL"
)
_RELEASE = "DELETE FROM counter_slots WHERE counter = ? AND slot = ?"
_OWN = "SELECT 1 FROM counter_slots WHERE counter = ? AND slot = ?"
_RENEW = (
    "UPDATE counter_slots SET expires_at = ? WHERE counter = ? AND slot = ? "
    "AND expires_at IS NOT NULL"
)


def _held(
    cur: sqlite3.Cursor, counter: str | bytes, slot: str | bytes | None,
    window: float | None, now: float,
) -> int:
    since = None if window is None else now - window
    cur.execute(_PRUNE, (counter, now, since, since))
    row = cur.execute(_HELD, (counter, slot, now, since, since)).fetchone()
    return int(row[0])


def reserve(
    cur: sqlite3.Cursor,
    slot: str,
    limits: Sequence[CounterLimit],
    now: float,
    ttl: float | None,
) -> SlotGrant:
    """Reserve ``slot`` under every counter of ``limits`` or none (in the caller's transaction)."""
    key = sql_text(slot)
    names = [sql_text(lim.counter) for lim in limits]
    counts = tuple(
        _held(cur, name, key, lim.window, now) for name, lim in zip(names, limits, strict=True)
    )
    expires_at = None if ttl is None else now + ttl
    if all(cur.execute(_OWN, (name, key)).fetchone() is not None for name in names):
        # the same call again (a durable re-run): it keeps the slot it holds
        cur.executemany(_RENEW, [(expires_at, name, key) for name in names])
        return SlotGrant(True, counts)
    for index, (lim, held) in enumerate(zip(limits, counts, strict=True)):
        if held >= lim.limit:
            return SlotGrant(False, counts, index)
    cur.executemany(_INSERT, [(name, key, now, expires_at) for name in names])
    return SlotGrant(True, counts)


def settle(
    cur: sqlite3.Cursor,
    slot: str,
    counters: Sequence[str],
    consume: bool,
    now: float,
    amount: int,
) -> None:
    """Consume ``slot`` under ``counters`` (upsert: counted once), or release it."""
    key = sql_text(slot)
    if consume:
        cur.executemany(_CONSUME, [(sql_text(c), key, amount, now) for c in counters])
    else:
        cur.executemany(_RELEASE, [(sql_text(c), key) for c in counters])


def count(cur: sqlite3.Cursor, counter: str, window: float | None, now: float) -> int:
    """What ``counter`` holds at ``now`` (in the caller's write transaction: it prunes)."""
    return _held(cur, sql_text(counter), None, window, now)
