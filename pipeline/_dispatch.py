"""`DispatchContext`: one dispatch (the model loop) of a turn."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import AlreadySignalledError, LoopError, NackedError
from ._events import Event

if TYPE_CHECKING:
    from ._context import TurnContext
    from ._gate import Gate
    from ._toolcall import ToolCall
    from .models._seam import Message

__all__ = ["DispatchContext"]


class DispatchContext:
    """One dispatch (the model loop) of a turn: iteration state and the ack/nack signal.

    Everything a `TurnContext` has is available here too and refers to the same turn: the same
    registry, the same stash, the same stored calls.
    """

    __slots__ = (
        "_ack_handlers",
        "_acked",
        "_nack_error",
        "_nacked",
        "_new",
        "dispatch_id",
        "iteration",
        "log",
        "spool",
        "stash",
        "system_prompt",
        "tools",
        "turn",
        "turn_id",
    )

    def __init__(self, turn: TurnContext, dispatch_id: str) -> None:
        """Build the dispatch context of ``turn``."""
        self.turn = turn
        self.dispatch_id = dispatch_id
        self.iteration = 0
        self.turn_id = turn.turn_id
        self.stash = turn.stash
        self.tools = turn.tools
        self.system_prompt = turn.system_prompt
        self.spool = turn.spool
        self.log = turn.log
        self._new: tuple[ToolCall, ...] = ()
        self._acked = False
        self._nacked = False
        self._nack_error: LoopError | None = None
        self._ack_handlers: list[Callable[[], None]] = []
        turn._dispatch = self

    def __repr__(self) -> str:
        """Show the dispatch id, iteration and signal state."""
        state = "acked" if self._acked else "nacked" if self._nacked else "open"
        return (
            f"DispatchContext(turn_id={self.turn_id!r}, dispatch_id={self.dispatch_id!r}, "
            f"iteration={self.iteration}, state={state})"
        )

    # -- delegated to the turn -----------------------------------------------------------------
    @property
    def conversation_id(self) -> str | None:
        """The conversation the turn belongs to, if any."""
        return self.turn.conversation_id

    @property
    def input(self) -> str:
        """The user input of the turn."""
        return self.turn.input

    @property
    def messages(self) -> Sequence[Message]:
        """History and this turn's messages, oldest first."""
        return self.turn.messages

    @property
    def turn_tool_calls(self) -> Sequence[ToolCall]:
        """This turn's completed calls in storage order."""
        return self.turn.turn_tool_calls

    @property
    def aborted(self) -> bool:
        """True once the turn was aborted."""
        return self.turn._aborted

    @property
    def abort_reason(self) -> str | None:
        """Why the turn was aborted, if it was and a reason was given."""
        return self.turn.abort_reason

    def abort(self, reason: str | None = None) -> None:
        """Abort the turn (there is one abort per turn)."""
        self.turn.abort(reason)

    def emit(self, event: Event) -> None:
        """Deliver an event to the runner's listeners."""
        self.turn._bus.emit(event, self.turn._pending)

    async def wait_for(self, gate: Gate) -> Any:
        """Pause until ``gate`` is settled (see `TurnContext.wait_for`)."""
        return await self.turn.wait_for(gate)

    async def store_message(self, message: Message) -> None:
        """Persist a message of the turn."""
        await self.turn.store_message(message)

    async def store_tool_call(self, call: ToolCall) -> None:
        """Persist a completed call; it joins `new_tool_calls` of this iteration."""
        await self.turn.store_tool_call(call)

    async def mutate_tool_call(self, call: ToolCall) -> None:
        """Replace a stored call by id, position kept."""
        await self.turn.mutate_tool_call(call)

    async def delete_tool_call(self, call_id: str) -> bool:
        """Delete a stored call by id; return whether it existed."""
        return await self.turn.delete_tool_call(call_id)

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        """Return this turn's call with that id, if any (O(1))."""
        return self.turn._by_id.get(call_id)

    def artifact_call_ids(self, cls: type) -> list[str]:
        """Ids of this turn's calls whose result is a non-inline artifact of ``cls``."""
        return self.turn.artifact_call_ids(cls)

    # -- dispatch-only -------------------------------------------------------------------------
    def tool_call_count(self, checksum: str) -> int:
        """How many stored calls (history included) have this checksum (O(1))."""
        return self.turn._checksums.get(checksum, 0)

    @property
    def new_tool_calls(self) -> Sequence[ToolCall]:
        """The calls stored during the current iteration, in storage order."""
        return self._new

    @property
    def is_acked(self) -> bool:
        """True once `ack` was called."""
        return self._acked

    @property
    def is_signalled(self) -> bool:
        """True once `ack` or `nack` was called."""
        return self._acked or self._nacked

    @property
    def nack_error(self) -> LoopError | None:
        """The error given to `nack` (a `NackedError` when none was given)."""
        return self._nack_error

    def ack(self) -> None:
        """Mark the dispatch successful; run `on_ack` handlers in order.

        Raises:
            AlreadySignalledError: the dispatch was already acked or nacked.
        """
        if self._acked or self._nacked:
            raise AlreadySignalledError(dispatch_id=self.dispatch_id)
        self._acked = True
        for handler in list(self._ack_handlers):
            try:
                handler()
            except Exception as exc:  # one failing handler must not stop the rest
                self.log.error(
                    "on_ack_error",
                    f"an on_ack handler raised {type(exc).__name__}: {exc}",
                    error=repr(exc),
                )

    def nack(self, error: LoopError | None = None) -> None:
        """Mark the dispatch failed with ``error`` (a `NackedError` when omitted).

        Raises:
            AlreadySignalledError: the dispatch was already acked or nacked.
            TypeError: ``error`` is not a `LoopError` (wrap other exceptions in one, e.g.
                ``NackedError(str(exc))`` raised ``from exc``).
        """
        if self._acked or self._nacked:
            raise AlreadySignalledError(dispatch_id=self.dispatch_id)
        if error is not None and not isinstance(error, LoopError):
            raise TypeError(f"nack() takes a LoopError or None, not {type(error).__name__}")
        self._nacked = True
        self._nack_error = error if error is not None else NackedError(dispatch_id=self.dispatch_id)

    def on_ack(self, handler: Callable[[], None]) -> Callable[[], None]:
        """Run ``handler()`` when the dispatch is acked; return the unsubscribe."""
        handlers = self._ack_handlers
        handlers.append(handler)

        def unsubscribe() -> None:
            if handler in handlers:
                handlers.remove(handler)

        return unsubscribe


DispatchContext.__module__ = "pipeline"
