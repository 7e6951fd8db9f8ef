"""`RecordKeeping`: a runner's record keepers, and the order of their writes around the store's.

Every change to a turn's stored calls (`TurnState.store_tool_call`, ``mutate_tool_call``,
``delete_tool_call``) goes through `RecordKeeping.persist`, which writes each keeper's record
and the store's write in the order `pipeline.stages.RecordKeeper` promises:

- a durable store (`is_durable`): the records of keepers that join the store's database go into
  the store's own transaction (`JointStore`); every other keeper's record is written first and
  awaited (write-ahead), so a process killed at any moment leaves no stored call without its
  record;
- a store that is not durable: the records are started and awaited when the turn ends
  (`RecordKeeping.track`), so the turn never waits on them call by call.

A keeper's failing write is reported (`RecordKeeping.failed`: a `Log` warning of kind
``"record_error"``) and never stops the store's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, cast

from ._events import Log
from ._record_keepers import JointRecordKeeper, RecordKeeper
from .stores._store import JointStore, is_durable

if TYPE_CHECKING:
    from ._record_keepers import RecordChange
    from ._turn_state import TurnState
    from .stores._store import TransactionWriter, TurnStore

__all__ = ["RecordKeeping", "keepers_among"]


def keepers_among(items: Sequence[object]) -> tuple[RecordKeeper, ...]:
    """The middleware items that are record keepers, in list order."""
    return tuple(item for item in items if isinstance(item, RecordKeeper))


class RecordKeeping:
    """One runner's record keepers over its store (built once, shared by its turns)."""

    __slots__ = ("_by_database", "_joint_store", "durable", "keepers", "store")

    def __init__(self, keepers: Sequence[RecordKeeper], store: TurnStore) -> None:
        """Keep ``keepers`` (non-empty) for changes persisted to ``store``."""
        self.keepers = tuple(keepers)
        self.store = store
        self.durable = is_durable(store)
        """Whether the store's writes survive the process (records are then written first)."""
        self._joint_store = isinstance(store, JointStore)
        self._by_database: dict[str, tuple[bool, ...]] = {}
        """Per database the store named, which keepers join it."""

    def __repr__(self) -> str:
        """Show the keepers and whether the store is durable."""
        return f"RecordKeeping(keepers={len(self.keepers)}, durable={self.durable})"

    def _joining(self) -> tuple[bool, ...] | None:
        """Which keepers write into the store's transactions now (None: none can)."""
        if not self._joint_store:
            return None
        database = cast("JointStore", self.store).transaction_database
        if database is None:  # an in-memory database, or a store not opened yet: ask again
            return None
        joining = self._by_database.get(database)
        if joining is None:
            joining = self._by_database[database] = tuple(
                isinstance(k, JointRecordKeeper) and k.joins(database) for k in self.keepers
            )
        return joining if any(joining) else None

    async def persist(self, state: TurnState, change: RecordChange, *, again: bool = False) -> None:
        """Write the keepers' records of ``change`` and the store's write, in the module's order.

        The store's write is skipped when the turn saves nothing (`TurnState.saves`); the
        records are written all the same. ``again``: the store's write of the same change
        failed before; the keepers whose records stand (written ahead, or tracked) are not
        asked again, those that write in the store's transaction (rolled back with it) are.
        """
        if not self.durable:
            if not again:
                self.start(state, change)
            if state.saves:
                await self._store_write(state, change, ())
            return
        joining = self._joining()
        writers: list[TransactionWriter] = []
        ahead: list[tuple[RecordKeeper, asyncio.Future[object]]] = []
        for i, keeper in enumerate(self.keepers):
            try:
                if joining is not None and joining[i]:
                    writers.append(cast("JointRecordKeeper", keeper).joint(change))
                elif not again:
                    ahead.append((keeper, asyncio.ensure_future(keeper.keep(change))))
            except Exception as exc:
                self.failed(state, keeper, change, exc)
        if ahead:
            outcomes = await asyncio.gather(*(w for _, w in ahead), return_exceptions=True)
            for (keeper, _), outcome in zip(ahead, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    self.failed(state, keeper, change, outcome)
                elif isinstance(outcome, BaseException):
                    raise outcome
        await self._store_write(state, change, writers)

    def start(self, state: TurnState, change: RecordChange) -> None:
        """Start the keepers' records of ``change``, awaited when the turn ends (not durable)."""
        for keeper in self.keepers:
            try:
                self.track(state, keeper.keep(change), keeper, change)
            except Exception as exc:  # a keeper must never break the turn
                self.failed(state, keeper, change, exc)

    def track(
        self,
        state: TurnState,
        write: Awaitable[object],
        keeper: RecordKeeper,
        change: RecordChange,
    ) -> None:
        """Have the turn await a keeper's write before it returns; report it if it fails.

        A finished write is let go at once, so a long turn (a gateway session's) holds only
        the writes still running.
        """
        future = write if isinstance(write, asyncio.Future) else asyncio.ensure_future(write)
        if future.done():
            self._done(state, future, keeper, change)
            return
        state.pending.add(future)
        future.add_done_callback(lambda done: self._done(state, done, keeper, change))

    def _done(
        self,
        state: TurnState,
        future: asyncio.Future[object],
        keeper: RecordKeeper,
        change: RecordChange,
    ) -> None:
        state.pending.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self.failed(state, keeper, change, exc)

    @staticmethod
    def failed(
        state: TurnState, keeper: RecordKeeper, change: RecordChange, exc: BaseException
    ) -> None:
        """Report a keeper's failed record of ``change`` as a `Log` warning (``record_error``)."""
        name = type(keeper).__qualname__
        state.emit(
            Log(
                turn_id=state.turn_id,
                level="warning",
                kind="record_error",
                message=(
                    f"record keeper {name} failed to keep the record of call "
                    f"{change.call.id!r} ({change.action}): {type(exc).__name__}: {exc}"
                ),
                payload={
                    "keeper": name,
                    "call_id": change.call.id,
                    "action": change.action,
                    "error": repr(exc),
                },
            )
        )

    @staticmethod
    async def _store_write(
        state: TurnState, change: RecordChange, writers: Sequence[TransactionWriter]
    ) -> None:
        if not state.saves:
            return
        store = state.store
        cid, tid, call = state.conversation_id, state.turn_id, change.call
        if writers:
            joint = cast("JointStore", store)
            if change.action == "deleted":
                await joint.delete_tool_call(cid, tid, call.id, writers=writers)
            else:
                await joint.save_tool_call(cid, tid, call, writers=writers)
        elif change.action == "deleted":
            await store.delete_tool_call(cid, tid, call.id)
        else:
            await store.save_tool_call(cid, tid, call)
