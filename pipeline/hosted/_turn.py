"""`HostedTurn`: one loopware turn driven by someone else's loop (a host's run).

A host (pydantic-ai, LangChain, the OpenAI Agents SDK, ADK, an MCP client) runs its own model
loop and its own tools. A hosted turn is an ordinary loopware turn (``turn_input``, dispatch
iterations, ``turn_output``, the store, the record keepers) whose executor is the host: each
iteration waits for the host's calls of one model step, and ends when the host closes the batch
(`end_batch`) or the run (`finish`). The mapping (docs/adapters/index.md):

* conversation = the host's thread or session (``conversation_id``), turn = one host run;
* iteration = one model step and its tool batch (``dispatch_output`` runs at `end_batch`);
* `ToolCall` = one host call id: `call` runs the ``tool_call`` stage around the host's handler
  and stores one record; a call id is decided once (asking again returns the same `HostedCall`,
  taking no second limit slot and no second repetition count).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from .._gate import GATE_WATCHER
from .._tool_checks import is_tool_name
from ..errors import InvalidToolCallError
from ._call import HostedCall, ended_record
from ._deferral import until_decided
from ._iterations import Iterations
from ._order import BatchOrder
from ._tools import CURRENT, HostCentre, HostTool, HostToolCache

if TYPE_CHECKING:
    from .._dispatch import DispatchContext
    from .._result import TurnResult
    from .._runner import TurnHandle
    from ..calls._toolcall import ToolCall

__all__ = ["HostedTurn"]

_INLINE: Final = sys.maxsize
"""A hosted call's text stays inline: the host keeps its own value, nothing is spooled."""


class HostedTurn:
    """One host run as a loopware turn; begin it with `HostedRunner.begin`.

    Use from the host's hooks: `offer` the host's tools, `announce` a batch's call ids in
    proposal order where the host runs a batch in varying order, `call` around each tool call,
    `before_model` before the next model step (it closes the batch, `end_batch`, and raises
    when a policy ended the turn), `hidden` to filter the tools shown, `snapshot` and
    `restore` the stash as plain data where the host persists state, `finish` at the run's end.
    """

    __slots__ = ("_calls", "_life", "_order", "_running", "_tools", "conversation_id")

    def __init__(self, conversation_id: str | None, tools: HostToolCache | None = None) -> None:
        """Prepare a hosted turn (`HostedRunner.begin` starts it, with its runner's ``tools``)."""
        self.conversation_id = conversation_id
        """The conversation (the host's thread or session) the turn belongs to, if any."""
        self._life = Iterations()
        self._calls: dict[str, HostedCall] = {}
        self._running: dict[str, asyncio.Future[None] | None] = {}
        self._order = BatchOrder()
        self._tools = HostToolCache() if tools is None else tools

    def __repr__(self) -> str:
        """Show the turn and how many calls it ran."""
        life = self._life
        turn_id = life.handle.turn_id if life.started else None
        return f"HostedTurn(turn_id={turn_id!r}, calls={len(self._calls)}, ended={self.ended})"

    # -- the turn's life -------------------------------------------------------------------------
    async def start(self, handle_of: Callable[[], TurnHandle]) -> None:
        """Start the turn (``handle_of`` starts it on the runner) and wait for its first step."""
        await self._life.start(handle_of)

    @property
    def ended(self) -> bool:
        """True once the turn has ended (finished, or a policy or error ended its dispatch)."""
        return self._life.ended

    @property
    def aborted(self) -> bool:
        """True once the turn was aborted (by a policy or `abort`): it takes no more calls.

        A call made now is answered aborted, not run, and stored; the turn ends at its next
        step (`end_batch` or `finish`).
        """
        d = self._life.dispatch
        return d is not None and d.aborted

    @property
    def turn_id(self) -> str:
        """The loopware turn's id."""
        return self._life.handle.turn_id

    @property
    def dispatch(self) -> DispatchContext | None:
        """The turn's dispatch context (stash, registry, stored calls), once it serves."""
        return self._life.dispatch

    async def end_batch(self) -> None:
        """Close the current model step's batch: ``dispatch_output`` runs, a new iteration starts.

        Both run in the caller's task (``pipeline/hosted/_iterations.py``). A no-op when no
        call ran since the last one (the host may call it before every model step). Calls
        announced but never made are dropped from the order.
        """
        self._order.clear()
        await self._life.end_batch()

    async def before_model(self) -> None:
        """Before the host asks its model again: close the batch, and stop if the turn ended.

        `end_batch`, then, when a policy ended the turn (a nack) or it was aborted, raise why:
        the host's run ends there, as a `TurnRunner`'s turn ends, instead of asking the model
        for calls no turn could record. Adapters call it in their hook before each model step.

        A turn a middleware acked early (``ctx.ack()`` in ``dispatch_output``) ended completed:
        nothing is raised, and the host's later calls are refused as `HostedCall.late`.

        Raises:
            LoopError: the turn's first error (`TurnResult.raise_for_status`): the nack's
                `PolicyViolationError`, or `TurnAbortedError` for an aborted turn.
        """
        await self.end_batch()
        life = self._life
        if life.ended:
            (await life.finish()).raise_for_status()

    async def finish(self) -> TurnResult:
        """End the run: close the batch, ``turn_output``, and return the turn's `TurnResult`."""
        self._order.clear()
        return await self._life.finish()

    def abort(self, reason: str | None = None) -> None:
        """Abort the turn (the host's run was cancelled or failed); `finish` gives its result."""
        if self._life.started:
            self._life.handle.abort(reason)

    # -- tools -----------------------------------------------------------------------------------
    def offer(self, tools: Iterable[HostTool]) -> None:
        """Register the host's tools in the turn's registry (those it does not hold yet).

        A policy's admission check (``ToolPolicy``) may refuse one: it is then withdrawn and
        listed by `hidden`.
        """
        d = self._life.dispatch
        if d is None:
            return
        registry = d.tools
        for spec in tools:
            if registry.get(spec.name) is None and is_tool_name(spec.name):
                registry.register(self._tools.tool(spec))

    def knows(self, name: str) -> bool:
        """Whether the turn holds a tool of this name, or a decision withdrew it.

        An adapter offers only the tools the turn does not know yet (describing a tool, its
        JSON Schema, costs more than asking).
        """
        d = self._life.dispatch
        if d is None:
            return False
        return d.tools.get(name) is not None or any(
            decision.tool == name for decision in d.tool_decisions
        )

    def hidden(self) -> frozenset[str]:
        """The tools the model must not be offered: hidden or withdrawn by a decision."""
        d = self._life.dispatch
        if d is None:
            return frozenset()
        names = {tool.name for tool in d.tools.hidden()}
        names.update(
            decision.tool for decision in d.tool_decisions if decision.action == "withdrawn"
        )
        return frozenset(names)

    # -- calls -----------------------------------------------------------------------------------
    def announce(self, call_ids: Sequence[str]) -> None:
        """Name a batch's call ids in proposal order: they then pass the stage in that order.

        For hosts that run a batch in varying order (LangChain's sync ``invoke`` runs it in a
        thread pool): a limit of 3 then lets the first 3 proposed calls run, whatever order
        their threads start in. Each call waits only until the calls before it reached their
        handler or finished; the order is dropped at `end_batch`.
        """
        self._order.announce(call_ids, self._calls)

    async def call(
        self,
        call_id: str,
        name: str,
        arguments: str | Mapping[str, Any],
        centre: HostCentre | None = None,
        *,
        validated: Mapping[str, Any] | None = None,
        approval: bool | None = None,
        defer: bool = False,
    ) -> HostedCall:
        """Run one host call through the ``tool_call`` stage; store its record once.

        Args:
            call_id: The host's (the provider's) id of the call.
            name: The tool name the model called.
            arguments: The arguments as the model sent them (JSON text or an object).
            centre: The host's handler of this call: called with the arguments the handler
                should run with (a hook may have replaced them), unless a hook decided first.
                None when the tool is a loopware `Tool` with its own handler (a registered
                tool, as the MCP gateway's upstream tools are): that handler runs, and a name
                the turn holds no tool of is refused by the stage as any unknown name is (it is
                not offered as a host tool, which only a call with a centre does).
            validated: The host's own validation of ``arguments`` (defaults applied), when it
                has one: the hooks read it as the call's validated arguments.
            approval: The host's decision for a call it resumed after pausing for an approval
                (``True`` approved, ``False`` rejected): an approval gate the call reaches is
                settled with it at once. A call deferred earlier in this turn runs again.
            defer: When the call reaches an approval gate and no ``approval`` was given, stop
                it there instead of waiting: the stage is unwound (a limit gives its slot
                back), nothing runs and nothing is stored, and `HostedCall.deferred` is True
                (the host pauses its run; it is listed in `deferred`).

        Returns:
            The `HostedCall`: its record, and whether the host forwards its own value
            (`HostedCall.forwarded`), re-raises its own error (`HostedCall.raises`) or shows
            the model `HostedCall.text`. The same object for a call id asked again. A call
            that waited (for its place in an announced batch, or for `end_batch`) while a
            policy ended the turn gets the record the turn stored for it as it ended (not run,
            one audit row); a call that came after the end is `HostedCall.late`.
        """
        known = self._calls.get(call_id)
        if known is not None and known.deferred and approval is not None:
            known = None  # a deferred call resumed with the host's decision: decide it now
            self._calls.pop(call_id)
        if known is not None:
            if call_id in self._running:  # the same call, still on its way: its one decision
                running = self._running[call_id]
                if running is None:
                    running = asyncio.get_running_loop().create_future()
                    self._running[call_id] = running
                await asyncio.shield(running)
            return known
        # a deferrable call's stage waits for its gate beside it (`until_decided`)
        parked = asyncio.get_running_loop().create_future() if defer else None
        order = self._order
        ordered = call_id in order
        hosted = HostedCall(
            call_id,
            name,
            arguments,
            centre,
            validated,
            partial(order.release, call_id) if ordered else _no_op,
            approval=approval,
            defer=defer,
            parked=_no_op if parked is None else partial(_settle, parked),
        )
        self._calls[call_id] = hosted
        self._running[call_id] = None  # a future only once a second ask waits for it
        life = self._life
        d = life.dispatch
        ended = life.ended
        if d is not None and not ended:  # if the turn ends first, it records the call
            d.announce(call_id, name)
        try:
            if ordered or not life.ready.done():  # it waits: the turn may end meanwhile
                if ordered:
                    await order.wait(call_id)
                if not life.ready.done():  # an iteration is being closed or started
                    await life.until_ready()
                d = life.dispatch
                ended = life.ended
            if d is None or ended:
                stored = None if d is None else d.get_tool_call(call_id)
                hosted.late = stored is None
                hosted.record = ended_record(d, call_id, name) if stored is None else stored
                return hosted
            if d.aborted:  # a policy aborted the turn: answered, not run (as the loop does)
                record: ToolCall | None = d.abandoned_call(call_id, name)
            else:
                record = await self._run(d, hosted, arguments, parked)
            if record is None:  # deferred at its gate: nothing ran, nothing is stored
                return hosted
            hosted.record = record
            try:
                await d.store_tool_call(record)
            except InvalidToolCallError as exc:  # the id names a call of an earlier turn
                d.report_error(exc, "executor")  # the host still gets its answer
            life.open = True
        finally:
            if ordered:
                order.release(call_id)
            hosted.finish()
            running = self._running.pop(call_id)
            if running is not None and not running.done():
                running.set_result(None)
        return hosted

    async def _run(
        self,
        d: DispatchContext,
        hosted: HostedCall,
        arguments: str | Mapping[str, Any],
        parked: asyncio.Future[None] | None,
    ) -> ToolCall | None:
        """The call's ``tool_call`` stage: its record, or None when it was deferred at a gate."""
        name = hosted.name
        if hosted.has_centre and d.tools.get(name) is None and is_tool_name(name):
            self.offer((HostTool(name),))
        raw = hosted.raw_args
        token = CURRENT.set(hosted)
        # only a call with the host's decision, or a deferrable one, has a gate to watch
        watching = hosted.approval is not None or hosted.defer
        watch = GATE_WATCHER.set(hosted.gate_opened) if watching else None
        try:
            stage = d.run_tool(
                name,
                raw if isinstance(raw, dict) else arguments,
                call_id=hosted.call_id,
                inline_limit=_INLINE,
            )
            # only a deferrable call runs its stage in a task of its own (to stop it there)
            return await (stage if parked is None else until_decided(stage, parked))
        finally:
            if watch is not None:
                GATE_WATCHER.reset(watch)
            CURRENT.reset(token)

    def get(self, call_id: str) -> HostedCall | None:
        """The call with this id, if the turn has run it (or is running it)."""
        return self._calls.get(call_id)

    @property
    def deferred(self) -> tuple[str, ...]:
        """The ids of the calls deferred at an approval gate in this turn (proposal order)."""
        return tuple(cid for cid, call in self._calls.items() if call.deferred)

    # -- the stash as plain data -----------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The stash as plain data (a deep copy), for the host's persisted state."""
        d = self._life.dispatch
        return {} if d is None else d.stash.all()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the stash's contents with a `snapshot` (after the host resumed a run).

        Raises:
            InvalidStashValueError: the snapshot is not plain data.
        """
        d = self._life.dispatch
        if d is None:
            return
        stash = d.stash
        for key in list(snapshot):
            stash.set(key, snapshot[key])
        for top in {path.split(".", 1)[0] for path in stash.keys()}:  # noqa: SIM118
            if top not in snapshot:
                stash.delete(top)


def _no_op() -> None:
    return None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


HostedTurn.__module__ = "pipeline.hosted"
