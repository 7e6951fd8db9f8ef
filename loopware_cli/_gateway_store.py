"""`WindowStore`: the gateway's turn store, holding a bounded window of each principal's calls.

A gateway session is one principal's stream of calls, served by turns that roll over after
``roll_over`` calls (``loopware_cli/_gateway_session.py``). The store keeps, per principal,
only its latest ``window`` calls, a few messages and turn summaries: enough for the next turn
to load the calls the repetition detector compares against, never more, so memory and rows
per session stay flat however long it runs. The audit chain, not this store, is the record of
every call.

Conversations are ``<principal>`` or ``<principal>#<name>`` (a name the client gave, within its
principal); all of a principal's conversations share its window, so naming a new conversation
starts with the principal's recent calls, not an empty history.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from pipeline.stores import MemoryStore

if TYPE_CHECKING:
    from pipeline.calls import ToolCall
    from pipeline.models import Message
    from pipeline.stores import CounterLimit, SlotGrant, TurnRecord

__all__ = ["WindowStore", "principal_part"]

_MESSAGES = 1
"""Messages kept per principal: the latest (each turn stores its input; nothing reads it)."""
_TURNS = 1
"""Turn summaries kept per principal: the latest (the audit chain has every turn)."""


def principal_part(conversation_id: str) -> str:
    """The principal of a gateway conversation id (``alice#research`` -> ``alice``)."""
    return conversation_id.partition("#")[0]


class _Window:
    __slots__ = ("calls", "messages", "turns")

    def __init__(self) -> None:
        self.calls: OrderedDict[tuple[str, str], ToolCall] = OrderedDict()
        self.messages: deque[Message] = deque(maxlen=_MESSAGES)
        self.turns: deque[TurnRecord] = deque(maxlen=_TURNS)


class WindowStore:
    """A `TurnStore` in memory keeping each principal's latest ``window`` calls (not durable)."""

    __slots__ = ("_counters", "_principals", "_window")

    durable: ClassVar[bool] = False
    """Nothing it keeps survives the process (``pipeline.stores.TurnStore``)."""
    suspends: ClassVar[bool] = False
    """No write awaits anything for real (``pipeline.stores.TurnStore``)."""

    def __init__(self, window: int) -> None:
        """Keep at most ``window`` calls per principal (at least 1)."""
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self._window = window
        self._principals: dict[str, _Window] = {}
        self._counters = MemoryStore()  # only its CounterStore side is used

    def __repr__(self) -> str:
        """The window and how much is held."""
        return f"WindowStore(window={self._window}, rows={self.rows()})"

    def rows(self, conversation_id: str | None = None) -> int:
        """Calls, messages and turn summaries held (for one principal's conversation, or all)."""
        if conversation_id is not None:
            held = self._principals.get(principal_part(conversation_id))
            windows = [] if held is None else [held]
        else:
            windows = list(self._principals.values())
        return sum(len(w.calls) + len(w.messages) + len(w.turns) for w in windows)

    def _of(self, conversation_id: str | None) -> _Window | None:
        if conversation_id is None:
            return None
        key = principal_part(conversation_id)
        held = self._principals.get(key)
        if held is None:
            held = self._principals[key] = _Window()
        return held

    async def save_turn(self, record: TurnRecord) -> None:
        """Keep the turn's summary among its principal's latest few."""
        held = self._of(record.conversation_id)
        if held is not None:
            held.turns.append(record)

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        """Keep the message among its principal's latest few."""
        held = self._of(conversation_id)
        if held is not None:
            held.messages.append(message)

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        """Keep the call (a stored one is replaced in place); drop the oldest past the window."""
        held = self._of(conversation_id)
        if held is None:
            return
        calls = held.calls
        calls[turn_id, call.id] = call
        while len(calls) > self._window:
            calls.popitem(last=False)

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        """Forget a call; return whether it was held."""
        held = self._principals.get(principal_part(conversation_id or ""))
        return held is not None and held.calls.pop((turn_id, call_id), None) is not None

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        """The principal's latest calls (no messages: a gateway turn reads none)."""
        held = self._principals.get(principal_part(conversation_id))
        if held is None:
            return (), ()
        return (), tuple(held.calls.values())

    # -- CounterStore (the caps' slots) ---------------------------------------------------------
    async def reserve_slot(
        self, slot: str, limits: Sequence[CounterLimit], *, now: float, ttl: float | None
    ) -> SlotGrant:
        """Reserve ``slot`` under every counter or none (``CounterStore.reserve_slot``)."""
        return await self._counters.reserve_slot(slot, limits, now=now, ttl=ttl)

    async def settle_slot(
        self,
        slot: str,
        counters: Sequence[str],
        *,
        consume: bool,
        now: float,
        amount: int = 1,
    ) -> None:
        """Consume or release ``slot`` (``CounterStore.settle_slot``)."""
        await self._counters.settle_slot(slot, counters, consume=consume, now=now, amount=amount)

    async def count_slots(self, counter: str, *, window: float | None, now: float) -> int:
        """What ``counter`` holds at ``now`` (``CounterStore.count_slots``)."""
        return await self._counters.count_slots(counter, window=window, now=now)
