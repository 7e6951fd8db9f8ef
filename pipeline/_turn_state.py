"""`TurnState`: everything one turn is, owned in one place.

A turn's registry, stash, messages, tool-call records (with the checksum counts and artifact
index kept current as they change), spool keys, abort state, open gates and events live here.
`TurnContext` and `DispatchContext` are public views of it; `Turn` drives it through the steps of
``docs/architecture.md``. Nothing outside this class writes these fields directly: records change
only through `store_message`, `store_tool_call`, `mutate_tool_call` and `delete_tool_call`, which
persist first and then update every index together.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    Awaitable,
    Callable,
    Container,
    Hashable,
    Iterable,
    Sequence,
)
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._events import (
    ErrorReported,
    Event,
    GateClosed,
    GateOpened,
    MessageStored,
    StageName,
    ToolCallStored,
    ToolDecided,
)
from ._gate import GATE_WATCHER
from ._record_keepers import RecordAction, RecordChange
from ._running_ids import NO_IDS, announce
from ._tool_threads import shared_tool_threads, tool_thread_loop
from .artifacts._artifact import SpooledArtifact
from .errors import InvalidToolCallError, LoopError, TurnAbortedError
from .stores._conversation import LazyRecords, added_counts, bump_count, load_records
from .stores._store import MemoryStore

if TYPE_CHECKING:
    from ._bus import EventBus
    from ._gate import Gate
    from ._onion import Onion
    from ._record_keeping import RecordKeeping
    from ._registry import ToolRegistry
    from ._stash import Stash
    from ._tool_threads import ToolThreads
    from .calls._decision import DecisionAction, ToolDecision
    from .calls._toolcall import ToolCall
    from .models._message import Message
    from .stores._conversation import ConversationHistory
    from .stores._spool import SpoolReader, SpoolStore
    from .stores._store import TurnStore

__all__ = ["InterruptedRun", "TurnState", "uncancellable"]

T = TypeVar("T")


class InterruptedRun(Protocol):
    """A call's run that an abort or a cancellation interrupted (a `ToolCallContext`).

    The turn keeps it until the dispatch answers the call (`DispatchContext.abandoned_call`);
    it needs only the call's id and the record that keeps what the run did, so the state does
    not name the runs built on it (docs/architecture.md, "The layers").
    """

    call_id: str
    """The provider's id of the call."""

    def abandon(self, reason: str, action: DecisionAction = "aborted") -> ToolCall:
        """The record of the call: what the run did, and a decision of ``action``."""
        ...


async def uncancellable(work: Awaitable[T]) -> T:
    """Run ``work`` to its end even if the awaiting task is cancelled meanwhile.

    Used for the writes that answer announced calls after an abort: a cancellation arriving
    while they run (the caller cancelling again, a deferred abort) waits for them, then is
    re-raised, so it still propagates and no write is cut in half.
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled() and task.exception() is not None:
            raise cancelled from task.exception()
        raise cancelled
    return task.result()


class TurnState:
    """One turn's data and the only code that changes it (see the module docstring).

    Fields are plain attributes for the turn's own machinery (`Turn`, the contexts); users see
    them through `TurnContext` and `DispatchContext`, which never hand this object out.
    """

    __slots__ = (
        "abort_hooks",
        "abort_reason",
        "aborted",
        "announced",
        "artifact_ids",
        "artifact_version",
        "bus",
        "by_id",
        "calls",
        "checksums",
        "conversation_id",
        "cursors",
        "deferred_cancel",
        "errors",
        "history_calls",
        "history_ids",
        "history_lazy",
        "history_messages",
        "input",
        "interrupted",
        "iterations",
        "judged",
        "keeping",
        "messages",
        "new_calls",
        "open_gates",
        "pending",
        "running_ids",
        "saves",
        "shield",
        "spool",
        "spool_keys",
        "staged",
        "stash",
        "store",
        "stored",
        "suspends",
        "system_prompt",
        "taken_tools",
        "tool_call_onion",
        "tool_decisions",
        "tool_threads",
        "tools",
        "turn_id",
        "unstored",
        "validated",
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
        tool_call_onion: Onion,
        system_prompt: str | None = None,
        conversation_id: str | None = None,
        keeping: RecordKeeping | None = None,
        tool_threads: ToolThreads | None = None,
    ) -> None:
        """Hold a fresh turn's parts (the runner builds one per ``run()``)."""
        self.turn_id = turn_id
        self.input = input
        self.conversation_id = conversation_id
        self.tools = tools
        self.stash = stash
        self.system_prompt = system_prompt
        self.store = store
        self.saves = conversation_id is not None or type(store) is not MemoryStore
        """False when a save could not keep anything: the default store keeps no records of a
        turn outside a conversation (the `TurnResult` holds them), so the call is skipped."""
        says = getattr(store, "suspends", True) is not False
        self.suspends = type(store) is not MemoryStore and says
        """Whether a store write may suspend (the memory store's, and those of a store that says
        ``suspends = False``, complete without doing so; see `TurnStore`)."""
        self.spool = spool
        self.tool_threads = tool_threads if tool_threads is not None else shared_tool_threads()
        """Where the turn's sync tool handlers run (the runner's; ``pipeline/_tool_threads.py``)."""
        self.bus = bus
        self.pending: set[asyncio.Future[Any]] = set()
        """Tasks of async listeners, and record keepers' writes still running
        (`RecordKeeping`), awaited before the turn returns."""
        self.keeping = keeping
        """The runner's record keepers (None when it has none): every change to the stored
        calls goes through them (``pipeline/_record_keeping.py``)."""
        self.history_messages: Sequence[Message] = ()
        """The conversation's messages before this turn (loaded when first read, per store)."""
        self.messages: list[Message] = []
        """This turn's messages (after ``history_messages``)."""
        self.calls: list[ToolCall] = []
        self.by_id: dict[str, ToolCall] = {}
        self.checksums: dict[str, int] = {}
        self.validated: dict[str, int] = {}
        """Stored calls per ``validated_checksum`` (those that carry one), history included."""
        self.staged: set[str] = set()
        """The ids of this turn's calls whose run went through the ``tool_call`` middleware."""
        self.judged: dict[str, str] = {}
        """This iteration's calls compared by their ``validated_checksum`` and not stored yet
        (call id to checksum; `ToolCallContext.identical_calls`)."""
        self.history_calls: Sequence[ToolCall] = ()
        """The conversation's calls before this turn (loaded when first read, per store)."""
        self.history_lazy = False
        """Whether the history's records may still load when read (`fetch_history`)."""
        self.history_ids: Container[str] = frozenset()
        """The ids of ``history_calls`` (membership only: no set of them is built)."""
        self.unstored: dict[str, ToolCall] = {}
        """Completed calls whose store write failed, by id (stored again at the turn's end)."""
        self.announced: dict[str, str] = {}
        """Calls an executor took with no message announcing them (a host's), by id: their
        tools' names (answered at the turn's end when they have no record: ``Turn``)."""
        self.running_ids: set[str] | frozenset[str] = NO_IDS
        """Ids announced by the running turns of the conversation (``pipeline/_running_ids.py``)."""
        self.new_calls: tuple[ToolCall, ...] = ()
        """The calls stored during the current iteration (what dispatch output reacts to)."""
        self.stored = 0
        """How many calls ``store_tool_call`` stored in this turn (never decreases)."""
        self.cursors: dict[Hashable, int] = {}
        """Per reader of ``unseen_tool_calls``, the value of ``stored`` it has seen up to."""
        self.artifact_ids: dict[str, type[SpooledArtifact]] = {}
        """Ids of this turn's calls whose result is a non-inline artifact, with its class."""
        self.artifact_version = 0
        """Bumped whenever ``artifact_ids`` changes (the loop re-forges query tools then)."""
        self.spool_keys: list[str] = []
        """Spool ids written for this turn (freed at turn end when the runner owns the spool)."""
        self.aborted = False
        self.abort_reason: str | None = None
        self.abort_hooks: list[Callable[[str | None], None]] = []
        self.open_gates: set[Gate[Any]] = set()
        self.shield = 0
        """How many store writes are in flight (an outside abort waits for them)."""
        self.deferred_cancel: Callable[[], None] | None = None
        self.errors: list[LoopError] = []
        """Every `LoopError` raised or reported during the turn, in order."""
        self.iterations = 0
        self.tool_call_onion = tool_call_onion
        """The runner's composed ``tool_call`` middleware (an empty onion when it has none)."""
        self.tool_decisions: list[ToolDecision] = []
        """Every decision about a tool taken in the turn, in order."""
        self.taken_tools: dict[str, ToolDecision] = {}
        """The latest decision that hid or withdrew each tool (what a later call to it reads)."""
        self.interrupted: dict[str, InterruptedRun] = {}
        """Runs an abort or a cancellation interrupted, by call id (their records keep what
        they did: see `CallRun.abandon`)."""

    def __repr__(self) -> str:
        """Show the turn id and how far it got."""
        return (
            f"TurnState(turn_id={self.turn_id!r}, tool_calls={len(self.calls)}, "
            f"aborted={self.aborted})"
        )

    # -- history -------------------------------------------------------------------------------
    def load_history(self, history: ConversationHistory) -> None:
        """Put a conversation's earlier messages and calls before this turn's (they count).

        Called once, before the turn stores anything. Costs what the store's counts hold (one
        copy of them), never a pass over the records (``pipeline/stores/_conversation.py``).
        """
        self.history_messages = history.messages
        self.history_calls = history.calls
        self.history_lazy = isinstance(history.messages, LazyRecords) or isinstance(
            history.calls, LazyRecords
        )
        self.history_ids = history.call_ids
        self.checksums = added_counts(self.checksums, history.checksums)
        self.validated = added_counts(self.validated, history.validated)

    async def fetch_history(self) -> None:
        """Load the history's records now if they load when read, off the event loop."""
        await load_records(self.history_messages, self.history_calls)
        self.history_lazy = False

    def seed_calls(
        self, calls: Iterable[ToolCall], *, new_calls: Sequence[ToolCall] | None = None
    ) -> None:
        """Record calls as already stored this turn, without persisting (test doubles).

        ``new_calls`` are the current iteration's (default: the seeded calls).
        """
        seeded = tuple(calls)
        for call in seeded:
            self.calls.append(call)
            self.by_id[call.id] = call
            self.count(call, 1)
        self.new_calls = seeded if new_calls is None else tuple(new_calls)

    # -- the loop's steps ------------------------------------------------------------------------
    def begin_iteration(self) -> None:
        """Start an iteration: no call is the iteration's yet (nor on its way)."""
        self.new_calls = ()
        if self.judged:
            self.judged.clear()

    def end_dispatch(self, iterations: int, error: LoopError | None) -> None:
        """Record how many iterations the dispatch ran and the error it ended with, if any."""
        self.iterations = iterations
        if error is not None and all(e is not error for e in self.errors):
            self.errors.append(error)

    def replace_tools(self, registry: ToolRegistry) -> None:
        """Make ``registry`` the turn's registry, for every stage from now on."""
        self.tools = registry

    def keep_interrupted(self, run: InterruptedRun) -> None:
        """Keep a run an abort or a cancellation interrupted (see `take_interrupted`)."""
        self.interrupted[run.call_id] = run

    def take_interrupted(self, call_id: str) -> InterruptedRun | None:
        """The interrupted run of ``call_id`` (once), to build its record from what it did."""
        return self.interrupted.pop(call_id, None)

    # -- events --------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        """Deliver an event to the listeners (async ones are awaited before the turn ends)."""
        loop = tool_thread_loop()
        if loop is not None:  # a sync handler's worker thread: listeners run on the loop
            loop.call_soon_threadsafe(self.bus.emit, event, self.pending)
            return
        self.bus.emit(event, self.pending)

    def report(self, error: LoopError, stage: StageName) -> None:
        """Record an error of the turn and emit `ErrorReported`."""
        self.errors.append(error)
        if self.bus.listening:
            self.emit(ErrorReported(turn_id=self.turn_id, error=error, stage=stage))

    # -- spool ---------------------------------------------------------------------------------
    def spool_write(self, call_id: str, data: str | bytes) -> SpoolReader:
        """Write a result body under ``<turn_id>/<call_id>`` and remember the key."""
        key = f"{self.turn_id}/{call_id}"
        reader = self.spool.write(key, data)
        self.spool_keys.append(key)
        return reader

    def release_spool(self) -> None:
        """Delete every body this turn wrote (results keep their own readers)."""
        spool = self.spool
        for key in self.spool_keys:
            spool.delete(key)
        self.spool_keys.clear()

    # -- abort ---------------------------------------------------------------------------------
    def on_abort(self, hook: Callable[[str | None], None]) -> None:
        """Call ``hook(reason)`` when the turn is aborted (the one way an abort is told)."""
        self.abort_hooks.append(hook)

    def abort(self, reason: str | None = None) -> None:
        """Mark the turn aborted, reject open gates and tell the abort hooks (once)."""
        if self.aborted:
            return
        self.aborted = True
        self.abort_reason = reason
        loop = tool_thread_loop()  # a sync handler aborting from its worker thread
        for gate in list(self.open_gates):
            if loop is None:
                gate.abort(reason)
            else:
                loop.call_soon_threadsafe(gate.abort, reason)
        for hook in self.abort_hooks:
            hook(reason)

    def defer_while_shielded(self, deliver: Callable[[], None]) -> bool:
        """Hold ``deliver`` until the store write in flight finishes; False when none is."""
        if self.shield:
            self.deferred_cancel = deliver
            return True
        return False

    def _unshield(self) -> None:
        # An abort from outside the turn never cancels a store write half-way (the record
        # would be persisted but missing from, or stale in, the turn); it is delivered after.
        self.shield -= 1
        if self.shield == 0 and self.deferred_cancel is not None:
            deliver, self.deferred_cancel = self.deferred_cancel, None
            deliver()

    # -- tools ---------------------------------------------------------------------------------
    def decide_tool(self, decision: ToolDecision) -> None:
        """Apply and keep a decision about a tool, and emit `ToolDecided`.

        ``"hidden"`` hides the tool in the turn's registry; ``"withdrawn"`` records a removal
        made by whoever decided (a registry admission check refusing the tool). A later call to
        the tool reads the decision.
        """
        if decision.action == "hidden":
            self.tools.hide(decision.tool)
        self.tool_decisions.append(decision)
        self.taken_tools[decision.tool] = decision
        if self.bus.listening:
            self.emit(ToolDecided(turn_id=self.turn_id, decision=decision))

    # -- gates ---------------------------------------------------------------------------------
    async def wait_for(self, gate: Gate[Any]) -> Any:
        """Pause until ``gate`` is settled and return its value (see `TurnContext.wait_for`)."""
        if self.aborted:
            raise TurnAbortedError("the turn was aborted before the gate opened", gate_id=gate.id)
        self.open_gates.add(gate)
        try:
            watcher = GATE_WATCHER.get()
            if watcher is not None:
                watcher(gate)
            self.emit(GateOpened(turn_id=self.turn_id, gate=gate))
            return await gate.wait()
        finally:
            self.open_gates.discard(gate)
            result = gate.result or "aborted"
            self.emit(GateClosed(turn_id=self.turn_id, gate_id=gate.id, result=result))

    # -- records -------------------------------------------------------------------------------
    async def store_message(self, message: Message) -> None:
        """Persist a message, then add it to the turn and emit `MessageStored`.

        The call ids an assistant message announces are taken in its conversation from here on
        (before the write: see ``pipeline/_running_ids.py``).
        """
        running = self.running_ids
        if message.tool_call_ids and isinstance(running, set):
            announce(running, message.tool_call_ids)
        if self.saves:
            write = self.store.save_message(self.conversation_id, self.turn_id, message)
            await self._persist(write, partial(self.messages.append, message))
        else:  # nothing to await: no cancellation can land between save and append
            self.messages.append(message)
        bus = self.bus
        if bus.listening and bus.wants(MessageStored):
            self.emit(MessageStored(turn_id=self.turn_id, message=message))

    async def store_tool_call(self, call: ToolCall, *, again: bool = False) -> None:
        """Persist a completed call, then record it, index it and emit `ToolCallStored`.

        The runner's record keepers keep their records of it with the store's write
        (``pipeline/_record_keeping.py``). When the write fails, the record is kept in
        ``unstored``: the turn stores it ``again`` when it answers its announced calls, and
        keepers that already kept it are not asked a second time.
        """
        if call.id in self.by_id:
            raise InvalidToolCallError(
                f"a tool call with id {call.id!r} is already stored in this turn; "
                "use mutate_tool_call() to replace it",
                call_id=call.id,
            )
        if call.id in self.history_ids:
            raise InvalidToolCallError(
                f"a tool call with id {call.id!r} is already stored in an earlier turn of "
                f"conversation {self.conversation_id!r}; give each call a unique id",
                call_id=call.id,
            )
        keeping = self.keeping
        if keeping is not None and not (self.saves or keeping.durable):
            # nothing to await: the records are started now and awaited when the turn ends
            keeping.start(self, self._change("stored", call))
            self._add(call)
        elif keeping is not None or self.saves:
            write = (
                self.store.save_tool_call(self.conversation_id, self.turn_id, call)
                if keeping is None
                else keeping.persist(self, self._change("stored", call), again=again)
            )
            try:
                await self._persist(write, partial(self._add, call))
            except Exception:
                self.unstored[call.id] = call
                raise
        else:  # nothing to await: no cancellation can land between save and record
            self._add(call)
        bus = self.bus
        if bus.listening and bus.wants(ToolCallStored):
            self.emit(ToolCallStored(turn_id=self.turn_id, call=call))

    def _change(
        self, action: RecordAction, call: ToolCall, previous: ToolCall | None = None
    ) -> RecordChange:
        return RecordChange(
            action=action,
            turn_id=self.turn_id,
            conversation_id=self.conversation_id,
            call=call,
            previous=previous,
        )

    def _add(self, call: ToolCall) -> None:
        """Record a stored call: in order, by id, counted, and among this iteration's."""
        self.calls.append(call)
        self.by_id[call.id] = call
        self.count(call, 1)
        self.new_calls = (*self.new_calls, call)
        self.stored += 1

    async def mutate_tool_call(self, call: ToolCall) -> None:
        """Replace the stored call with the same id (position kept), persisting first."""
        old = self.by_id.get(call.id)
        if old is None:
            raise InvalidToolCallError(
                f"no tool call with id {call.id!r} in this turn", call_id=call.id
            )
        write = (
            self.store.save_tool_call(self.conversation_id, self.turn_id, call)
            if self.keeping is None
            else self.keeping.persist(self, self._change("amended", call, old))
        )
        await self._persist(write, partial(self._replace, old, call))
        bus = self.bus
        if bus.listening and bus.wants(ToolCallStored):
            self.emit(ToolCallStored(turn_id=self.turn_id, call=call))

    async def delete_tool_call(self, call_id: str) -> bool:
        """Delete a stored call by id; return whether it existed in this turn."""
        old = self.by_id.get(call_id)
        if old is None:
            return False
        write = (
            self.store.delete_tool_call(self.conversation_id, self.turn_id, call_id)
            if self.keeping is None
            else self.keeping.persist(self, self._change("deleted", old))
        )
        await self._persist(write, partial(self._replace, old, None))
        return True

    def _replace(self, old: ToolCall, new: ToolCall | None) -> None:
        """Put ``new`` in ``old``'s place (position kept), or remove ``old`` when None."""
        calls = list(self.calls)  # edit a copy: views handed out keep what they showed
        if new is None:
            calls.remove(old)
            del self.by_id[old.id]
        else:
            calls[calls.index(old)] = new
            self.by_id[new.id] = new
        self.calls = calls
        self.count(old, -1)
        if new is not None:
            self.count(new, 1)
        if old in self.new_calls:
            kept = (new if c is old else c for c in self.new_calls)
            self.new_calls = tuple(c for c in kept if c is not None)

    async def _persist(self, write: Awaitable[object], apply: Callable[[], object]) -> None:
        """Run a store write, then ``apply`` its change to the turn, as one step.

        Neither an abort from outside (deferred while the write runs, see `_unshield`) nor the
        caller cancelling the turn's task splits them: the write finishes and the turn records
        it, then the cancellation propagates. So the turn never misses a record its store holds
        (an assistant message whose announced calls the turn would then not answer).
        """
        self.shield += 1
        try:
            if self.suspends:

                async def step() -> None:
                    await write
                    apply()

                await uncancellable(step())
            else:  # nothing is awaited for real: no cancellation can land between the two
                await write
                apply()
        finally:
            self._unshield()

    def unseen_calls(self, reader: Hashable) -> Sequence[ToolCall]:
        """The calls stored since ``reader`` last asked (see `TurnView.unseen_tool_calls`)."""
        unseen = self.stored - self.cursors.get(reader, 0)
        self.cursors[reader] = self.stored
        calls = self.calls
        return tuple(calls[max(len(calls) - unseen, 0) :]) if unseen > 0 else ()

    def missed_calls(self, unseen: int) -> Sequence[ToolCall]:
        """The last ``unseen`` stored calls: those of an iteration a reader missed, then its own."""
        calls = self.calls
        return tuple(calls[max(len(calls) - unseen, 0) :])

    def count(self, call: ToolCall, delta: int) -> None:
        """Keep the checksum counts and the artifact index current for one added/removed call."""
        checksums, key = self.checksums, call.checksum
        if delta > 0:  # a stored call (the common case, inline)
            checksums[key] = checksums.get(key, 0) + delta
        else:
            bump_count(checksums, key, delta)
        vkey = call.validated_checksum
        if vkey is not None:
            bump_count(self.validated, vkey, delta)
            if delta > 0 and self.judged:  # stored now: counted as stored, no longer on its way
                self.judged.pop(call.id, None)
        results = call.results
        if not call.inline and not call.from_artifact_tool and isinstance(results, SpooledArtifact):
            if delta > 0:
                self.artifact_ids[call.id] = type(results)
            else:
                self.artifact_ids.pop(call.id, None)
            self.artifact_version += 1
        elif delta < 0 and self.artifact_ids.pop(call.id, None) is not None:
            self.artifact_version += 1
