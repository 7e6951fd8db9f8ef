"""`TurnContext` (and what it shares with `DispatchContext`): public views of one turn's state.

Both contexts read and change the turn only through its `TurnState` (``pipeline/_turn_state.py``),
so what a middleware, an executor or a tool handler does through a context is exactly what the
built-in machinery does. See ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._events import Event, Log, LogLevel
from ._history import HistoryView
from .models._seam import Usage

if TYPE_CHECKING:
    from ._gate import Gate
    from ._registry import ToolRegistry
    from ._stash import Stash
    from ._tool_threads import ToolThreads
    from ._turn_state import TurnState
    from .artifacts._artifact import SpooledArtifact
    from .calls._decision import ToolDecision
    from .calls._toolcall import ToolCall
    from .models._message import Message
    from .stores._spool import SpoolReader, SpoolStore
    from .stores._store import TurnStore

__all__ = ["USAGE_PATH", "ContextLog", "TurnContext", "TurnView"]

USAGE_PATH = "loopware.usage"
"""Where a turn's token usage lives in its stash: the four `Usage` counts and ``calls``."""

T = TypeVar("T")


class ContextLog:
    """``ctx.log``: emits `Log` events for the turn."""

    __slots__ = ("_state",)

    def __init__(self, state: TurnState) -> None:
        """Bind the logger to a turn."""
        self._state = state

    def __repr__(self) -> str:
        """Name the turn."""
        return f"ContextLog(turn_id={self._state.turn_id!r})"

    def _log(self, level: LogLevel, kind: str, message: str, payload: dict[str, Any]) -> None:
        state = self._state
        if state.bus.listening:
            state.emit(
                Log(turn_id=state.turn_id, level=level, kind=kind, message=message, payload=payload)
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


class TurnView:
    """What `TurnContext` and `DispatchContext` share: one turn, seen through its state.

    Both contexts of a turn refer to the same registry, the same stash and the same records.
    """

    __slots__ = ("_state", "log", "spool", "stash", "system_prompt", "tool_threads", "turn_id")

    _state: TurnState
    turn_id: str
    """The turn's id."""
    stash: Stash
    """The turn's stash (one per turn, shared by every stage)."""
    system_prompt: str | None
    """The system prompt handed to the model."""
    spool: SpoolStore
    """Where result bodies are written (see `spool_write`)."""
    tool_threads: ToolThreads
    """Where sync tool handlers run, bounded by the runner's ``tool_threads`` (`ToolThreads`);
    ``await ctx.tool_threads.run(fn, ...)`` runs other blocking work under the same bound."""
    log: ContextLog
    """Emit `Log` events for the turn: ``ctx.log.info(kind, message, **payload)``."""

    def _bind(self, state: TurnState, log: ContextLog) -> None:
        self._state = state
        self.turn_id = state.turn_id
        self.stash = state.stash
        self.system_prompt = state.system_prompt
        self.spool = state.spool
        self.tool_threads = state.tool_threads
        self.log = log

    # -- the turn ------------------------------------------------------------------------------
    @property
    def tools(self) -> ToolRegistry:
        """The turn's registry (one per turn; assigning replaces it for every stage)."""
        return self._state.tools

    @tools.setter
    def tools(self, registry: ToolRegistry) -> None:
        self._state.replace_tools(registry)

    @property
    def conversation_id(self) -> str | None:
        """The conversation the turn belongs to, if any."""
        return self._state.conversation_id

    @property
    def store(self) -> TurnStore:
        """The store the turn persists to (the runner's ``store``).

        Policies that count across turns keep their counts there when it is a
        `pipeline.stores.CounterStore` (every built-in store is); write the turn's own records
        through `store_message` and `store_tool_call`, never through this.
        """
        return self._state.store

    @property
    def input(self) -> str:
        """The user input of the turn."""
        return self._state.input

    @property
    def messages(self) -> Sequence[Message]:
        """History and this turn's messages, oldest first, as they are now.

        A read-only view, not a copy (O(1)): it keeps showing what it showed when read, so
        reading it every iteration costs nothing per message (``pipeline/_history.py``).
        """
        state = self._state
        return HistoryView(state.history_messages, state.messages)

    @property
    def turn_tool_calls(self) -> Sequence[ToolCall]:
        """This turn's stored calls in storage order, as they are now (a read-only view)."""
        return HistoryView((), self._state.calls)

    def unseen_tool_calls(self, reader: Hashable) -> Sequence[ToolCall]:
        """This turn's calls stored since ``reader`` last asked (all of them the first time).

        ``reader`` is any hashable naming who reads (a middleware passes itself); each reader
        has its own position, kept by the turn. A middleware that reacts to stored calls reads
        them through it in ``dispatch_output`` and again in ``turn_output``, so it also sees the
        calls of an iteration whose ``dispatch_output`` did not run (an executor that stored
        calls and acked in one invocation). In a dispatch stage the answer is
        ``new_tool_calls`` preceded by any calls the reader missed earlier (O(1) when it missed
        none). Calls deleted meanwhile can shift what a reader is shown.
        """
        return self._state.unseen_calls(reader)

    def crossed_tool_call_stage(self, call_id: str) -> bool:
        """Whether the call ``call_id`` of this turn went through the ``tool_call`` middleware.

        True for a call whose run (`DispatchContext.run_tool`) reached the stage's hooks,
        whatever they decided; False for a record stored without one (a custom executor's own,
        a call refused before the stage: an unknown tool, unusable arguments). A middleware
        that keeps its counts as calls cross the stage reads it to count, among the stored
        calls, only those that did not (O(1)).
        """
        return call_id in self._state.staged

    @property
    def history_tool_calls(self) -> Sequence[ToolCall]:
        """Stored calls of earlier turns of the conversation, as of the turn's start.

        A store that keeps the conversation's counts (`pipeline.stores.HistoryStore`) may load
        them when first read: reading it costs what the conversation holds.
        """
        return self._state.history_calls

    async def load_history(self) -> None:
        """Load the conversation's earlier messages and calls now, without blocking the loop.

        A store that keeps the conversation's counts (`pipeline.stores.HistoryStore`) loads
        its records when first read, in the thread that reads them. Await this before reading
        ``messages``, ``tool_calls`` or `model_request` in a long conversation: the records
        load in a worker thread while the event loop runs on. Costs nothing once loaded, or
        when the store handed them loaded (`MemoryStore`).
        """
        if self._state.history_lazy:
            await self._state.fetch_history()

    @property
    def tool_calls(self) -> Sequence[ToolCall]:
        """Every stored call the model has seen: the history's, then this turn's.

        A read-only view as of now, not a copy (O(1)), like `messages`.
        """
        state = self._state
        return HistoryView(state.history_calls, state.calls)

    @property
    def listening(self) -> bool:
        """True when anybody listens to events (build an event only then)."""
        return self._state.bus.listening

    def listens_for(self, event_type: type[Event]) -> bool:
        """True when a listener would receive an event of ``event_type`` (build it only then)."""
        bus = self._state.bus
        return bus.listening and bus.wants(event_type)

    @property
    def usage(self) -> Usage:
        """Tokens this turn's model calls used so far.

        Read from ``loopware.usage`` in the stash, where the executor adds each call's usage.
        """
        return Usage.from_mapping(self.stash.get(USAGE_PATH))

    def add_usage(self, usage: Usage) -> None:
        """Add one model call's usage to the turn's; executors call it per model call.

        It lands in ``loopware.usage`` in the stash, which `TurnResult.usage` and budget
        middleware read.
        """
        stash = self.stash
        for name, value in usage.as_dict().items():
            if value:
                stash.increment(f"{USAGE_PATH}.{name}", value)
        stash.increment(f"{USAGE_PATH}.calls")

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        """Return this turn's call with that id, if any (O(1))."""
        return self._state.by_id.get(call_id)

    def tool_call_count(self, checksum: str) -> int:
        """How many stored calls (history included) have this checksum (O(1))."""
        return self._state.checksums.get(checksum, 0)

    def validated_call_count(self, validated_checksum: str) -> int:
        """How many stored calls (history included) carry this ``validated_checksum`` (O(1)).

        Only calls whose run computed it carry one (a policy read
        `ToolCallContext.validated_checksum`): two calls that differ only by spelling out a
        default count as the same call here.
        """
        return self._state.validated.get(validated_checksum, 0)

    @property
    def tool_decisions(self) -> Sequence[ToolDecision]:
        """The decisions about tools taken in this turn so far, in order."""
        return tuple(self._state.tool_decisions)

    def decide_tool(self, decision: ToolDecision) -> None:
        """Take a decision about a tool for the rest of the turn, and say why.

        ``action="hidden"`` hides the tool in the turn's registry (it is no longer offered nor
        callable); ``"withdrawn"`` records that whoever decided removed it (a registry
        admission check refusing it). Either way a later call to the tool reads
        ``E_TOOL_UNAVAILABLE`` with the policy and reason, the decision is kept in
        ``TurnResult.tool_decisions``,
        emitted as `ToolDecided` and audited as a row of its own: never as a row of the call
        that led to it. (Hiding with ``ctx.tools.hide`` says nothing: the model then reads the
        name as unknown.)
        """
        self._state.decide_tool(decision)

    def is_call_id_taken(self, call_id: str) -> bool:
        """True when a call with this id is stored in this turn or its conversation.

        A provider pairs an assistant message's calls with their results by id, so one id
        must name one call in the conversation the model reads. Ids announced by other turns
        of the conversation running in this process count too (``pipeline/_running_ids.py``).
        """
        state = self._state
        return (
            call_id in state.by_id or call_id in state.history_ids or call_id in state.running_ids
        )

    def artifact_call_ids(self, cls: type[SpooledArtifact]) -> list[str]:
        """Ids of this turn's calls whose result is a non-inline artifact of ``cls``.

        Calls made through artifact tools are never included. Inline artifacts were shown to
        the model whole, so no query tools are forged for them.
        """
        return [cid for cid, kind in self._state.artifact_ids.items() if issubclass(kind, cls)]

    # -- events and abort ------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Deliver an event to the listeners (async ones are awaited before the turn ends)."""
        self._state.emit(event)

    @property
    def aborted(self) -> bool:
        """True once the turn was aborted."""
        return self._state.aborted

    @property
    def abort_reason(self) -> str | None:
        """Why the turn was aborted, if it was and a reason was given."""
        return self._state.abort_reason

    def abort(self, reason: str | None = None) -> None:
        """Abort the turn (there is one abort per turn).

        Middleware not yet started are skipped, the loop stops at the next step boundary, open
        gates are rejected, and in-flight work is cancelled when called from outside the turn.
        """
        self._state.abort(reason)

    async def wait_for(self, gate: Gate[T]) -> T:
        """Pause until ``gate`` is settled and return its resolved value.

        Raises:
            TurnAbortedError: the turn was already aborted.
            GateAbortedError: the gate or the turn was aborted while waiting.
            GateTimeoutError: the gate's timeout passed.
        """
        value: T = await self._state.wait_for(gate)
        return value

    # -- storage -------------------------------------------------------------------------------
    def spool_write(self, call_id: str, data: str | bytes) -> SpoolReader:
        """Write a result body to the turn's spool under ``<turn_id>/<call_id>``.

        The body is released at turn end when the runner owns the spool (its default); the
        returned reader (and any artifact built over it) stays readable.
        """
        return self._state.spool_write(call_id, data)

    def store_message(self, message: Message) -> Coroutine[Any, Any, None]:
        """Persist a message, then add it to the turn and emit `MessageStored` (await it)."""
        return self._state.store_message(message)  # its coroutine: one frame less per call

    def store_tool_call(self, call: ToolCall) -> Coroutine[Any, Any, None]:
        """Persist a completed call, then record it and emit `ToolCallStored` (await it).

        It joins ``new_tool_calls`` of the current iteration.

        Raises:
            InvalidToolCallError: a call with this id was already stored this turn (use
                `mutate_tool_call` to replace one), or in an earlier turn of the conversation
                (the model would read two calls with one id).
        """
        return self._state.store_tool_call(call)

    async def mutate_tool_call(self, call: ToolCall) -> None:
        """Replace the stored call with the same id (position kept), persisting first.

        Raises:
            InvalidToolCallError: no call with that id is stored in this turn.
        """
        await self._state.mutate_tool_call(call)

    async def delete_tool_call(self, call_id: str) -> bool:
        """Delete a stored call by id; return whether it existed in this turn."""
        return await self._state.delete_tool_call(call_id)


class TurnContext(TurnView):
    """The context of the turn stages (`turn_input`, `turn_output`): one turn, seen whole."""

    __slots__ = ()

    def __init__(self, state: TurnState) -> None:
        """Build the view of ``state`` (the runner does this; tests use `pipeline.testing`)."""
        self._bind(state, ContextLog(state))

    def __repr__(self) -> str:
        """Show the turn id and how far it got."""
        state = self._state
        return (
            f"TurnContext(turn_id={self.turn_id!r}, tool_calls={len(state.calls)}, "
            f"aborted={state.aborted})"
        )


for _cls in (ContextLog, TurnContext):
    _cls.__module__ = "pipeline"
