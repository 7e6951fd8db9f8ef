"""`BatchOrder`: the calls of a host's batch pass the ``tool_call`` stage in proposal order.

Some hosts run a batch in varying order (LangChain's sync ``invoke`` runs it in a thread pool).
When the host names the batch's call ids in proposal order (`HostedTurn.announce`), each call
waits until the calls proposed before it reached their handler or finished, so a limit of 3
lets the first 3 proposed calls run, whatever order their threads start in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Iterable

__all__ = ["BatchOrder"]


class BatchOrder:
    """The proposal order of one batch's call ids, and the calls waiting for their place."""

    __slots__ = ("_next", "_order", "_passed", "_waiters")

    def __init__(self) -> None:
        """An empty order: every call passes at once."""
        self._order: dict[str, int] = {}
        self._passed: set[int] = set()
        self._next = 0
        self._waiters: dict[int, asyncio.Future[None]] = {}

    def __repr__(self) -> str:
        """Show how many calls are ordered and how many passed."""
        return f"BatchOrder(calls={len(self._order)}, passed={len(self._passed)})"

    def __contains__(self, call_id: object) -> bool:
        """Whether ``call_id`` is ordered (a call not ordered passes at once)."""
        return call_id in self._order

    def announce(self, call_ids: Iterable[str], taken: Container[str]) -> None:
        """Add ``call_ids`` in proposal order (but those already ordered or ``taken``)."""
        order = self._order
        for call_id in call_ids:
            if call_id not in order and call_id not in taken:
                order[call_id] = len(order)

    async def wait(self, call_id: str) -> None:
        """Wait until every call proposed before ``call_id`` passed (at once if not ordered)."""
        slot = self._order.get(call_id)
        while slot is not None and self._next < slot and call_id in self._order:
            waiter = self._waiters.get(slot)
            if waiter is None:
                waiter = self._waiters[slot] = asyncio.get_running_loop().create_future()
            await waiter

    def release(self, call_id: str) -> None:
        """``call_id`` reached its handler or finished: the calls after it may go on."""
        slot = self._order.get(call_id)
        if slot is None or slot in self._passed:
            return
        self._passed.add(slot)
        while self._next in self._passed:
            self._next += 1
        for waiting in [s for s in self._waiters if s <= self._next]:
            waiter = self._waiters.pop(waiting)
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        """Drop the order (the batch is closed): every waiting call goes on."""
        self._order.clear()
        self._passed.clear()
        self._next = 0
        for waiter in self._waiters.values():
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
