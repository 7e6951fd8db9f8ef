"""The persistence seam: the `TurnStore` protocol and the default in-memory store.

Also the `JointStore` protocol of stores that run other writers' writes (`TransactionWriter`)
in their own transactions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from ._conversation import ConversationHistory, HistoryStore, reads_its_own_way
from ._counters import CounterLimit, MemoryCounters, SlotGrant
from ._memory_history import ConversationLog

if TYPE_CHECKING:
    from .._events import TurnStatus
    from ..calls._toolcall import ToolCall
    from ..models._message import Message

__all__ = [
    "JointStore",
    "MemoryStore",
    "TransactionWriter",
    "TurnRecord",
    "TurnStore",
    "is_durable",
    "read_history",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRecord:
    """The summary of one finished turn, as a store keeps it."""

    turn_id: str
    """The turn's id."""
    conversation_id: str | None
    """The conversation it belongs to, if any."""
    status: TurnStatus
    """How it ended."""
    input: str
    """The user input."""
    output: str | None
    """The final assistant text, if any."""
    iterations: int
    """How many dispatch iterations ran."""
    error_code: str | None
    """The code of the error that failed the turn, if any."""
    error_message: str | None
    """The message of that error, if any."""
    started_at: datetime
    """When the turn started."""
    ended_at: datetime
    """When it ended."""


class TurnStore(Protocol):
    """Where turns, messages and tool calls are persisted.

    Every method must have made the write durable (as far as the store can) before it returns:
    the runner relies on that to promise that a stored call is never lost.

    A store whose writes do not survive the process (`MemoryStore`) says so with a class or
    instance attribute ``durable = False``; the runner then writes record keepers' records
    without waiting for them at each store (``pipeline.stages.RecordKeeper``). A store without
    the attribute is taken to be durable.

    A store whose writes complete without ever suspending (nothing in them is awaited for
    real: a store in process memory) may say so with ``suspends = False``; a turn then awaits
    each write directly instead of in a task that shields it from cancellation. A store
    without the attribute is taken to suspend.
    """

    async def save_turn(self, record: TurnRecord) -> None:
        """Persist (insert or replace) a finished turn's summary."""
        ...

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Persist a message of a turn (insert or replace by message id)."""
        ...

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        """Persist a tool call (insert or replace by turn and id; a replaced one keeps its place).

        Calls are keyed by their turn and id, never by id alone: concurrent turns of one
        conversation may store the same provider id (``call_0``), and both calls are kept.
        """
        ...

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        """Delete a turn's tool call by id; return whether it existed."""
        ...

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return a conversation's messages and tool calls, each in storage order."""
        ...


async def read_history(store: TurnStore, conversation_id: str) -> ConversationHistory:
    """A conversation's history, as `Turn` starts from it.

    The store's kept counts when it is a `HistoryStore`; else its records
    (``load_conversation``) counted here (a user's store, `DurableStore`).
    """
    if isinstance(store, HistoryStore):  # counts kept by the store: O(1) here
        return await store.load_history(conversation_id)
    return ConversationHistory.of_records(*await store.load_conversation(conversation_id))


def is_durable(store: object) -> bool:
    """Whether ``store``'s writes survive the process: not when it says ``durable = False``."""
    return getattr(store, "durable", True) is not False


class TransactionWriter(Protocol):
    """Another party's writes that a `JointStore` runs inside one of its own transactions.

    An audit sink's rows written beside the call they record: both commit, or neither does.
    """

    def write(self, connection: object) -> Awaitable[None] | None:
        """Write with the store's ``connection``, inside its transaction, before it commits.

        What ``connection`` is, and whether the store awaits what this returns, is the
        store's to say (`JointStore`): `SqliteStore` passes the ``sqlite3.Cursor`` of its
        transaction on its worker thread and expects None; `PostgresStore` passes the
        ``psycopg.AsyncConnection`` on its own event loop and awaits the awaitable returned.
        An exception rolls the whole transaction back (and fails the store's write).
        """
        ...

    def settle(self, committed: bool) -> None:
        """Learn how the transaction ended: ``committed`` True, or False when it did not.

        Called once, after the commit or the rollback. Must not raise (an exception from it
        is ignored).
        """
        ...


@runtime_checkable
class JointStore(TurnStore, Protocol):
    """A `TurnStore` whose writes of a call can carry other writers' writes in one transaction.

    ``save_tool_call`` and ``delete_tool_call`` take ``writers``: `TransactionWriter`s written
    to this store's database (``transaction_database``), run in the transaction of the call's
    own write, after it, before the commit.
    """

    @property
    def transaction_database(self) -> str | None:
        """The database this store's transactions write to, as writers name theirs.

        None when no other writer can share them (an in-memory database, a store not opened
        yet). ``"sqlite:<real path of the file>"`` for `SqliteStore`; for `PostgresStore`,
        ``"postgresql:host=<h> port=<p> dbname=<d> user=<u>"`` as libpq resolved its
        connection string (``psycopg``'s ``connection.info``).
        """
        ...

    async def save_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call: ToolCall,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> None:
        """`TurnStore.save_tool_call`, running ``writers`` in the same transaction."""
        ...

    async def delete_tool_call(
        self,
        conversation_id: str | None,
        turn_id: str,
        call_id: str,
        *,
        writers: Sequence[TransactionWriter] = (),
    ) -> bool:
        """`TurnStore.delete_tool_call`, running ``writers`` in the same transaction."""
        ...


class MemoryStore:
    """The default store: keeps conversations in process memory (lost when the process exits).

    Turns run without a ``conversation_id`` are not retained: their records live in the
    `TurnResult`, so a long-running process does not grow with every turn. It is also a
    `CounterStore` (for scoped limits), whose counts live as long as the store, and a
    `HistoryStore`: each conversation's counts are kept as its calls are written, so a turn's
    start costs the same at any length of the conversation.
    """

    __slots__ = ("_conversations", "_counters", "_turns")

    durable: ClassVar[bool] = False
    """Nothing it keeps survives the process (see `TurnStore`)."""

    def __init__(self) -> None:
        """Create an empty store."""
        self._turns: dict[str, TurnRecord] = {}
        self._conversations: dict[str, ConversationLog] = {}
        """Per conversation, its messages and its calls keyed by (turn id, call id), in storage
        order, with their counts (``pipeline/stores/_conversation.py``)."""
        self._counters = MemoryCounters()

    def __repr__(self) -> str:
        """Show how much the store holds."""
        calls = sum(len(c.calls.records) for c in self._conversations.values())
        return f"MemoryStore(turns={len(self._turns)}, tool_calls={calls})"

    async def save_turn(self, record: TurnRecord) -> None:
        """Keep the turn's summary when it belongs to a conversation."""
        if record.conversation_id is not None:
            self._turns[record.turn_id] = record

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Keep a message under its conversation (``None``: no conversation)."""
        if conversation_id is None:
            return
        self._conversation(conversation_id).messages.put(message.id, message)

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        """Keep a call under its conversation, replacing its turn's call of that id in place."""
        if conversation_id is None:
            return
        self._conversation(conversation_id).save_call(turn_id, call)

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        """Forget a turn's tool call; return whether it was there."""
        if conversation_id is None or conversation_id not in self._conversations:
            return False
        return self._conversations[conversation_id].delete_call(turn_id, call_id)

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """Return the conversation's messages and calls in storage order."""
        log = self._conversations.get(conversation_id)
        if log is None:
            return (), ()
        return tuple(log.messages.records), tuple(log.calls.records)

    async def load_history(self, conversation_id: str) -> ConversationHistory:
        """The conversation's history in O(1) (see `HistoryStore`).

        A subclass that overrides ``load_conversation`` is read through it instead.
        """
        if reads_its_own_way(self, MemoryStore):
            return ConversationHistory.of_records(*await self.load_conversation(conversation_id))
        return self._conversation(conversation_id).history()

    def _conversation(self, conversation_id: str) -> ConversationLog:
        log = self._conversations.get(conversation_id)
        if log is None:
            log = self._conversations[conversation_id] = ConversationLog()
        return log

    def turn(self, turn_id: str) -> TurnRecord | None:
        """Return a stored turn's summary, if any."""
        return self._turns.get(turn_id)

    # -- CounterStore ---------------------------------------------------------------------------
    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """Reserve ``slot`` under every counter or none (see `CounterStore.reserve_slot`)."""
        return self._counters.reserve_now(slot, limits, now=now, ttl=ttl)

    async def settle_slot(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """Consume or release ``slot`` (see `CounterStore.settle_slot`)."""
        self._counters.settle_now(slot, counters, consume=consume, now=now, amount=amount)

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """What ``counter`` holds at ``now`` (see `CounterStore.count_slots`)."""
        return await self._counters.count_slots(counter, window=window, now=now)


for _cls in (TurnRecord, TurnStore, TransactionWriter, JointStore, MemoryStore):
    _cls.__module__ = "pipeline.stores"
