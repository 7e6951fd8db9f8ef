"""The record-keeper seam: what a middleware item keeps of every change to a turn's stored calls.

`RecordChange` is one change (a call stored, amended or deleted); a `RecordKeeper` (an audit
log) writes its own record of it, durably, with the store's write; a `JointRecordKeeper` writes
it inside the store's own transaction. `TurnState` tells the keepers (through
``pipeline/_record_keeping.py``); `pipeline.stages` exports the names. See docs/architecture.md,
"One call".
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol, runtime_checkable

from ._frozen import slot_setters

if TYPE_CHECKING:
    from .calls._toolcall import ToolCall
    from .stores._store import TransactionWriter

__all__ = ["JointRecordKeeper", "RecordAction", "RecordChange", "RecordKeeper"]

RecordAction = Literal["stored", "amended", "deleted"]
"""What changed about a turn's stored call: stored (``store_tool_call``), replaced
(``mutate_tool_call``), or deleted (``delete_tool_call``)."""


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class RecordChange:
    """One change to a turn's stored tool calls, as a `RecordKeeper` is told of it."""

    action: RecordAction
    """``"stored"``, ``"amended"`` or ``"deleted"`` (see `RecordAction`)."""
    turn_id: str
    """The turn whose call changed."""
    conversation_id: str | None
    """The turn's conversation, if any."""
    call: ToolCall
    """The record stored (``"stored"``), the new form (``"amended"``) or the record deleted
    (``"deleted"``)."""
    previous: ToolCall | None = None
    """The record an amendment replaced (None for the other actions)."""

    def __init__(
        self,
        *,
        action: RecordAction,
        turn_id: str,
        conversation_id: str | None,
        call: ToolCall,
        previous: ToolCall | None = None,
    ) -> None:
        """Set the fields: one change is built per stored call, so through the slots' setters."""
        set_action, set_turn, set_conversation, set_call, set_previous = _CHANGE_SETTERS
        set_action(self, action)
        set_turn(self, turn_id)
        set_conversation(self, conversation_id)
        set_call(self, call)
        set_previous(self, previous)


_CHANGE_SETTERS: Final = slot_setters(
    RecordChange, "action", "turn_id", "conversation_id", "call", "previous"
)


@runtime_checkable
class RecordKeeper(Protocol):
    """A middleware item that keeps its own record of every change to a turn's stored calls.

    The runner tells each keeper among its middleware of every call a turn stores, amends or
    deletes (`RecordChange`), before the store's write, and orders the writes so that **no
    call is stored without its record** even if the process is killed at any moment:

    - When the store is durable (it does not say ``durable = False``, as `MemoryStore` does):
      a `JointRecordKeeper` that writes to the store's own database (a `JointStore` whose
      ``transaction_database`` it `joins`) has its record written inside the store's
      transaction (both commit or neither does); every other keeper's `keep` is awaited before
      the store's write begins (a kill in between leaves a record of a call that was not
      stored, never the reverse).
    - When the store is not durable (nothing it keeps survives the process), `keep` is started
      and the turn awaits it before ``run()`` returns.

    A keeper's failing write is reported as a `Log` warning of kind ``"record_error"`` and never
    fails the turn: the store's write goes on.
    """

    def keep(self, change: RecordChange) -> Awaitable[object]:
        """Start writing the record of ``change``; the awaitable completes once it is durable.

        Called on the turn's event loop; the write must have started when it returns (the
        turn may not await it until it ends).
        """
        ...


@runtime_checkable
class JointRecordKeeper(RecordKeeper, Protocol):
    """A `RecordKeeper` that can write its records inside a store's transaction."""

    def joins(self, database: str) -> bool:
        """True when the keeper writes to ``database`` (a `JointStore`'s database).

        ``database`` is the store's ``transaction_database``; a keeper that joins it has its
        records written in that store's transactions (`joint`).
        """
        ...

    def joint(self, change: RecordChange) -> TransactionWriter:
        """The record of ``change`` as writes for the store's own transaction.

        Asked instead of `keep` when the keeper `joins` the store's database; the store runs
        the writer in the transaction of its write of the call, after it, before the commit.
        """
        ...


for _cls in (RecordChange, RecordKeeper, JointRecordKeeper):
    _cls.__module__ = "pipeline.stages"
