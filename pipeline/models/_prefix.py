"""Converting a conversation for a provider once per turn: each request converts only what is new.

A `ModelRequest` carries the whole conversation (messages and stored tool calls, history
included) on every iteration. A provider model converts it to its wire format through a
`PrefixCache`: per turn it keeps the provider messages already built and how much of the
request they cover, and converts only the messages (and the results of the calls they
announced) that arrived since. The cost of a request therefore does not grow with the length of
the turn (beyond copying the list of references it hands to the SDK).

The cache holds a bounded number of turns (least recently used first out), so a model instance
can serve many concurrent turns without growing. A request whose history no longer extends the
cached one (a call mutated or deleted, a turn id reused, a context window that dropped its
oldest messages: `DispatchContext.keep_history_from`) is converted again from the start.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from ..calls._toolcall import ToolCall
    from ._message import Message
    from ._seam import ModelRequest

__all__ = ["ConversationStep", "PrefixCache"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ConversationStep:
    """One message of the conversation, with the stored results of the calls it announced."""

    message: Message
    """A user message, or an assistant message (``tool_call_ids`` lists its calls)."""
    results: tuple[ToolCall, ...]
    """For an assistant message, the stored calls it announced, in announcement order (an id
    with no stored call is left out: the provider model decides how to answer it)."""


@dataclass(slots=True)
class _TurnPrefix(Generic[T]):
    messages: int = 0
    """How many of the request's messages are converted."""
    calls: int = 0
    """How many of the request's tool calls are indexed."""
    last_call: ToolCall | None = None
    """The last indexed call, to notice a history that changed."""
    first: Message | None = None
    """The first converted message, to notice a window that moved (`keep_history_from`)."""
    by_id: dict[str, ToolCall] = field(default_factory=dict)
    converted: list[T] = field(default_factory=list)


class PrefixCache(Generic[T]):
    """Per turn, the provider messages built so far (see the module docstring).

    ``convert(step)`` turns one `ConversationStep` into the provider's messages (a list: an
    assistant message with three calls may become four OpenAI messages); it is called once per
    message per turn.
    """

    __slots__ = ("_convert", "_max_turns", "_turns")

    def __init__(
        self, convert: Callable[[ConversationStep], Sequence[T]], *, max_turns: int = 256
    ) -> None:
        """Cache conversions made by ``convert`` for up to ``max_turns`` turns at once."""
        self._convert = convert
        self._max_turns = max_turns
        self._turns: OrderedDict[str, _TurnPrefix[T]] = OrderedDict()

    def __repr__(self) -> str:
        """Show how many turns are cached."""
        return f"PrefixCache(turns={len(self._turns)}, max_turns={self._max_turns})"

    def messages(self, request: ModelRequest) -> list[T]:
        """The provider messages for ``request``'s whole conversation (a fresh list)."""
        turn_id = request.turn_id
        prefix = self._turns.get(turn_id) if turn_id is not None else None
        messages, calls = request.messages, request.tool_calls
        if prefix is None or not _extends(prefix, messages, calls):
            prefix = _TurnPrefix()
            if turn_id is not None:
                self._turns[turn_id] = prefix
                while len(self._turns) > self._max_turns:
                    self._turns.popitem(last=False)
        elif turn_id is not None:
            self._turns.move_to_end(turn_id)
        by_id = prefix.by_id
        for call in calls[prefix.calls :]:
            by_id[call.id] = call
        if len(calls) > prefix.calls:
            prefix.calls = len(calls)
            prefix.last_call = calls[-1]
        convert, converted = self._convert, prefix.converted
        for message in messages[prefix.messages :]:
            results = tuple(by_id[i] for i in message.tool_call_ids if i in by_id)
            converted.extend(convert(ConversationStep(message, results)))
        prefix.messages = len(messages)
        prefix.first = messages[0] if messages else None
        return list(converted)

    def forget(self, turn_id: str) -> None:
        """Drop one turn's cached conversion (a model may call it when it knows a turn ended)."""
        self._turns.pop(turn_id, None)


def _extends(
    prefix: _TurnPrefix[T], messages: Sequence[Message], calls: Sequence[ToolCall]
) -> bool:
    """True when the request's history still starts with what ``prefix`` converted.

    Messages are append-only; a stored call can be mutated or deleted, which shows as a
    different call at the last indexed position (or fewer calls). An assistant message whose
    calls were not all stored when it was converted would also miss results: it is converted
    again from the start.
    """
    if len(messages) < prefix.messages or len(calls) < prefix.calls:
        return False
    if prefix.messages and messages[0] is not prefix.first:  # the window moved: new start
        return False
    if prefix.calls and calls[prefix.calls - 1] is not prefix.last_call:
        return False
    if prefix.messages:
        last = messages[prefix.messages - 1]
        if last.tool_call_ids and not all(i in prefix.by_id for i in last.tool_call_ids):
            return False
    return True
