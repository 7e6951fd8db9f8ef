"""`TurnContext` and `DispatchContext`: what middleware, executors and tools see of a turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import InvalidToolCallError, TurnAbortedError
from ._events import Event, GateClosed, GateOpened, Log, LogLevel, MessageStored, ToolCallStored

if TYPE_CHECKING:
    from ._bus import EventBus
    from ._gate import Gate
    from ._registry import ToolRegistry
    from ._stash import Stash
    from ._toolcall import ToolCall
    from .models._seam import Message
    from .stores._spool import SpoolStore
    from .stores._store import TurnStore

__all__ = ["ContextLog", "DispatchContext", "TurnContext"]

from ._dispatch import DispatchContext


class ContextLog:
    """``ctx.log``: emits `Log` events for the turn."""

    __slots__ = ("_turn",)

    def __init__(self, turn: TurnContext) -> None:
        """Bind the logger to a turn."""
        self._turn = turn

    def __repr__(self) -> str:
        """Name the turn."""
        return f"ContextLog(turn_id={self._turn.turn_id!r})"

    def _log(self, level: LogLevel, kind: str, message: str, payload: dict[str, Any]) -> None:
        turn = self._turn
        if turn._bus.listening:
            turn.emit(
                Log(turn_id=turn.turn_id, level=level, kind=kind, message=message, payload=payload)
            )

    def debug(self, kind: str, message: str, **payload: Any) -> None:
        """Emit a debug record."""
        self._log("debug", kind, message, payload)

    def info(self, kind: str, message: str, **payload: Any) -> None:
        """Emit an info record."""
        self._log("info", kind, message, payload)

    def warning(self, kind: str, message: str, **payload: Any) -> None:
        """Emit a warning record."""
        self._log("warning", kind, message, payload)

    def error(self, kind: str, message: str, **payload: Any) -> None:
        """Emit an error record."""
        self._log("error", kind, message, payload)


class TurnContext:
    """Everything one turn owns: its registry, stash, messages, tool calls and abort state."""

    __slots__ = (
        "_abort_hooks",
        "_aborted",
        "_artifact_ids",
        "_artifact_version",
        "_bus",
        "_by_id",
        "_calls",
        "_checksums",
        "_deferred_cancel",
        "_dispatch",
        "_history_calls",
        "_history_ids",
        "_messages",
        "_open_gates",
        "_pending",
        "_shield",
        "_spool_keys",
        "_store",
        "abort_reason",
        "conversation_id",
        "input",
        "log",
        "spool",
        "stash",
        "system_prompt",
        "tools",
        "turn_id",
    )

    def __init__(
        self,
        *,
        turn_id: str,
        input: str,
        tools: ToolRegistry,
        stash: Stash,
        store: TurnStore,
        spool: SpoolStore,
        bus: EventBus,
        system_prompt: str | None = None,
        conversation_id: str | None = None,
        history_messages: Sequence[Message] = (),
        history_calls: Sequence[ToolCall] = (),
    ) -> None:
        """Build a turn's context (the runner does this; tests use `pipeline.testing`)."""
        self.turn_id = turn_id
        self.input = input
        self.conversation_id = conversation_id
        self.tools = tools
        self.stash = stash
        self.system_prompt = system_prompt
        self.spool = spool
        self.log = ContextLog(self)
        self.abort_reason: str | None = None
        self._store = store
        self._bus = bus
        self._pending: set[asyncio.Task[Any]] = set()
        self._messages: list[Message] = []
        self._calls: list[ToolCall] = []
        self._by_id: dict[str, ToolCall] = {}
        self._checksums: dict[str, int] = {}
        self._history_calls: tuple[ToolCall, ...] = ()
        self._history_ids: set[str] = set()
        self._load_history(history_messages, history_calls)
        self._artifact_ids: dict[str, type] = {}
        self._artifact_version = 0
        self._aborted = False
        self._abort_hooks: list[Callable[[str | None], None]] = []
        self._open_gates: set[Gate] = set()
        self._dispatch: DispatchContext | None = None
        self._shield = 0
        self._spool_keys: list[str] = []
        """Spool ids this turn's executor wrote (freed at turn end when the runner owns the
        spool: a default `MemorySpoolStore` must not keep every result of every turn)."""
        self._deferred_cancel: Callable[[], None] | None = None

    def __repr__(self) -> str:
        """Show the turn id and how far it got."""
        return (
            f"TurnContext(turn_id={self.turn_id!r}, tool_calls={len(self._calls)}, "
            f"aborted={self._aborted})"
        )

    def _load_history(self, messages: Sequence[Message], calls: Sequence[ToolCall]) -> None:
        """Add a conversation's earlier messages and calls (they count for repeats)."""
        self._messages[:0] = messages
        self._history_calls = (*calls, *self._history_calls)
        for call in calls:
            self._checksums[call.checksum] = self._checksums.get(call.checksum, 0) + 1
            self._history_ids.add(call.id)

    @property
    def history_tool_calls(self) -> Sequence[ToolCall]:
        """Tool calls of earlier turns of the conversation, loaded at turn start."""
        return self._history_calls

    # -- read-only views -------------------------------------------------------------------
    @property
    def messages(self) -> Sequence[Message]:
        """History and this turn's messages, oldest first (a read-only copy)."""
        return tuple(self._messages)

    @property
    def turn_tool_calls(self) -> Sequence[ToolCall]:
        """This turn's completed calls in storage order (a read-only copy)."""
        return tuple(self._calls)

    @property
    def aborted(self) -> bool:
        """True once the turn was aborted."""
        return self._aborted

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        """Return this turn's call with that id, if any (O(1))."""
        return self._by_id.get(call_id)

    def tool_call_count(self, checksum: str) -> int:
        """How many stored calls (history included) have this checksum (O(1))."""
        return self._checksums.get(checksum, 0)

    def artifact_call_ids(self, cls: type) -> list[str]:
        """Ids of this turn's calls whose result is a non-inline artifact of ``cls``.

        Calls made through artifact tools are never included. Inline artifacts were shown to
        the model whole, so no query tools are forged for them.
        """
        return [cid for cid, kind in self._artifact_ids.items() if issubclass(kind, cls)]

    # -- events ------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Deliver an event to the listeners (async ones are awaited before the turn ends)."""
        self._bus.emit(event, self._pending)

    # -- abort -------------------------------------------------------------------------------
    def abort(self, reason: str | None = None) -> None:
        """Abort the turn.

        Middleware not yet started are skipped, the loop stops at the next step boundary, open
        gates are rejected, and in-flight work is cancelled when called from outside the turn.
        """
        if self._aborted:
            return
        self._aborted = True
        self.abort_reason = reason
        for gate in list(self._open_gates):
            gate.abort(reason)
        for hook in self._abort_hooks:
            hook(reason)

    # -- gates -------------------------------------------------------------------------------
    async def wait_for(self, gate: Gate) -> Any:
        """Pause until ``gate`` is settled and return its resolved value.

        Raises:
            TurnAbortedError: the turn was already aborted.
            GateAbortedError: the gate or the turn was aborted while waiting.
            GateTimeoutError: the gate's timeout passed.
        """
        if self._aborted:
            raise TurnAbortedError("the turn was aborted before the gate opened", gate_id=gate.id)
        self._open_gates.add(gate)
        try:
            self.emit(GateOpened(turn_id=self.turn_id, gate=gate))
            return await gate.wait()
        finally:
            self._open_gates.discard(gate)
            result = gate.result or "aborted"
            self.emit(GateClosed(turn_id=self.turn_id, gate_id=gate.id, result=result))

    # -- storage -----------------------------------------------------------------------------
    async def store_message(self, message: Message) -> None:
        """Persist a message, then add it to the turn and emit `MessageStored`."""
        self._shield += 1
        try:
            await self._store.save_message(self.conversation_id, self.turn_id, message)
            self._messages.append(message)
        finally:
            self._unshield()
        if self._bus.listening:
            self.emit(MessageStored(turn_id=self.turn_id, message=message))

    async def store_tool_call(self, call: ToolCall) -> None:
        """Persist a completed call before returning, then record it and emit `ToolCallStored`.

        Raises:
            InvalidToolCallError: a call with this id was already stored this turn (use
                `mutate_tool_call` to replace one), or in an earlier turn of the conversation
                (the store keys a conversation's calls by id: it would be overwritten).
        """
        if call.id in self._by_id:
            raise InvalidToolCallError(
                f"a tool call with id {call.id!r} is already stored in this turn; "
                "use mutate_tool_call() to replace it",
                call_id=call.id,
            )
        if call.id in self._history_ids:
            raise InvalidToolCallError(
                f"a tool call with id {call.id!r} is already stored in an earlier turn of "
                f"conversation {self.conversation_id!r}; give each call a unique id",
                call_id=call.id,
            )
        self._shield += 1
        try:
            await self._store.save_tool_call(self.conversation_id, self.turn_id, call)
            self._calls.append(call)
            self._by_id[call.id] = call
            self._count(call, 1)
            dispatch = self._dispatch
            if dispatch is not None:
                dispatch._new = (*dispatch._new, call)
        finally:
            self._unshield()
        if self._bus.listening:
            self.emit(ToolCallStored(turn_id=self.turn_id, call=call))

    async def mutate_tool_call(self, call: ToolCall) -> None:
        """Replace the stored call with the same id (position kept), persisting first.

        Raises:
            InvalidToolCallError: no call with that id is stored in this turn.
        """
        old = self._by_id.get(call.id)
        if old is None:
            raise InvalidToolCallError(
                f"no tool call with id {call.id!r} in this turn", call_id=call.id
            )
        self._shield += 1
        try:
            await self._store.save_tool_call(self.conversation_id, self.turn_id, call)
            self._calls[self._calls.index(old)] = call
            self._by_id[call.id] = call
            self._count(old, -1)
            self._count(call, 1)
            dispatch = self._dispatch
            if dispatch is not None and old in dispatch._new:
                dispatch._new = tuple(call if c is old else c for c in dispatch._new)
        finally:
            self._unshield()
        if self._bus.listening:
            self.emit(ToolCallStored(turn_id=self.turn_id, call=call))

    async def delete_tool_call(self, call_id: str) -> bool:
        """Delete a stored call by id; return whether it existed in this turn."""
        old = self._by_id.get(call_id)
        if old is None:
            return False
        self._shield += 1
        try:
            await self._store.delete_tool_call(self.conversation_id, self.turn_id, call_id)
            self._calls.remove(old)
            del self._by_id[call_id]
            self._count(old, -1)
            dispatch = self._dispatch
            if dispatch is not None and old in dispatch._new:
                dispatch._new = tuple(c for c in dispatch._new if c is not old)
        finally:
            self._unshield()
        return True

    def _unshield(self) -> None:
        # An abort from outside the turn never cancels a store write half-way (the record
        # would be persisted but missing from, or stale in, the turn); it is delivered after.
        self._shield -= 1
        if self._shield == 0 and self._deferred_cancel is not None:
            deliver, self._deferred_cancel = self._deferred_cancel, None
            deliver()

    def _count(self, call: ToolCall, delta: int) -> None:
        checksums = self._checksums
        n = checksums.get(call.checksum, 0) + delta
        if n > 0:
            checksums[call.checksum] = n
        else:
            checksums.pop(call.checksum, None)
        results = call.results
        if not call.inline and not call.from_artifact_tool and _is_artifact(results):
            if delta > 0:
                self._artifact_ids[call.id] = type(results)
            else:
                self._artifact_ids.pop(call.id, None)
            self._artifact_version += 1
        elif delta < 0 and self._artifact_ids.pop(call.id, None) is not None:
            self._artifact_version += 1


def _is_artifact(value: object) -> bool:
    from .artifacts._artifact import SpooledArtifact

    return isinstance(value, SpooledArtifact)


for _cls in (ContextLog, TurnContext):
    _cls.__module__ = "pipeline"
