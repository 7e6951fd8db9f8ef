"""`DispatchContext`: one dispatch (the model loop) of a turn, a view of the turn's state."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._context import TurnView
from ._events import ModelTextDelta, StageName
from ._history import HistoryView
from .calls._decision import DecisionAction
from .calls._outcome import DEFAULT_INLINE_LIMIT
from .calls._run import CallRun, interrupted_record, unrun_record
from .errors import AlreadySignalledError, LoopError, NackedError
from .models._seam import ModelRequest, model_request

if TYPE_CHECKING:
    from ._context import TurnContext
    from ._turn_state import TurnState
    from .calls._toolcall import ToolCall
    from .models._message import Message

__all__ = ["DispatchContext"]


class DispatchContext(TurnView):
    """One dispatch (the model loop) of a turn: iteration state and the ack/nack signal.

    Everything a `TurnContext` has is available here too and refers to the same turn: the same
    registry, the same stash, the same stored calls. ``run_tool`` runs one proposed call the way
    the standard executor does, so a custom executor needs nothing private.
    """

    __slots__ = (
        "_ack_handlers",
        "_acked",
        "_history_start",
        "_nack_error",
        "_nacked",
        "dispatch_id",
        "iteration",
        "turn",
    )

    def __init__(self, state: TurnState, turn: TurnContext, dispatch_id: str) -> None:
        """Build the dispatch context of ``turn`` over its ``state``."""
        self._bind(state, turn.log)
        self.turn = turn
        """The turn's own context."""
        self.dispatch_id = dispatch_id
        """The dispatch's id."""
        self.iteration = 0
        """The current iteration, 0-based."""
        self._acked = False
        self._nacked = False
        self._nack_error: LoopError | None = None
        self._ack_handlers: list[Callable[[], None]] = []
        self._history_start = 0

    def __repr__(self) -> str:
        """Show the dispatch id, iteration and signal state."""
        state = "acked" if self._acked else "nacked" if self._nacked else "open"
        return (
            f"DispatchContext(turn_id={self.turn_id!r}, dispatch_id={self.dispatch_id!r}, "
            f"iteration={self.iteration}, state={state})"
        )

    # -- this iteration --------------------------------------------------------------------------
    @property
    def new_tool_calls(self) -> Sequence[ToolCall]:
        """The calls stored during the current iteration, in storage order."""
        return self._state.new_calls

    def unseen_tool_calls(self, reader: Hashable) -> Sequence[ToolCall]:
        """This iteration's calls, preceded by any stored earlier that ``reader`` has not seen.

        See `TurnView.unseen_tool_calls`; O(1) when the reader missed nothing.
        """
        state = self._state
        stored = state.stored
        cursors = state.cursors
        unseen = stored - cursors.get(reader, 0)
        cursors[reader] = stored
        new = state.new_calls
        if unseen <= len(new):  # the reader missed nothing: the iteration's calls, no copy
            return new
        return state.missed_calls(unseen)

    def run_tool(
        self,
        name: str,
        arguments: str | Mapping[str, Any],
        *,
        call_id: str,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
    ) -> Coroutine[Any, Any, ToolCall]:
        """Run one call the model proposed; await it for the completed record (not yet stored).

        ``arguments`` is the JSON text the provider sent (or an already parsed object). The
        call gets a run (`ToolCallContext`): its arguments are parsed, its tool looked up among
        the turn's visible tools, the arguments validated, the ``tool_call`` middleware run
        around the handler, and the record built with every decision taken. Bad JSON,
        arguments that fail the tool's schema, a name no tool has, a tool a decision took away,
        a denial and a raising handler all give an error record the model reads next iteration;
        they never raise. Text and bytes results up to ``inline_limit`` UTF-8 bytes are shown
        whole (``inline=True``); longer ones are spooled and shown as an artifact handle. Store
        the record with `store_tool_call`.

        Raises:
            TurnAbortedError: the handler or a ``tool_call`` hook aborted the turn (answer the
                call with `abandoned_call`).
        """
        state = self._state
        if state.announced:  # the call's run answers it from now on (`announce`)
            state.announced.pop(call_id, None)
        run = CallRun(self, state, call_id, name)
        return run.run(state.tools, arguments, state.tool_call_onion, inline_limit)

    def refused_call(
        self,
        call_id: str,
        name: str,
        *,
        policy: str,
        reason: str,
        action: DecisionAction = "denied",
        text: str | None = None,
    ) -> ToolCall:
        """The record of a proposed call the executor answers without running it.

        The record carries the decision (``policy``, ``action``, ``reason``) and the model
        reads ``text`` (default ``Error: <policy> <action> the call: <reason>; it was not
        run.``). The standard executor answers calls beyond ``max_calls_per_response`` so.
        """
        if text is None:
            text = f"Error: {policy} {action} the call: {reason}; it was not run."
        return unrun_record(call_id, name, policy=policy, action=action, reason=reason, text=text)

    def announce(self, call_id: str, name: str) -> None:
        """Name a call the executor has taken before its record is stored.

        Calls an assistant message proposes are announced by the message; an executor that
        takes calls without one (a host driving the turn, `pipeline.hosted`) announces each
        here. If the turn ends before the call's run begins (`run_tool`), the turn stores a
        record for it (not run, decided ``aborted`` or ``failed`` by how the turn ended), so
        every call the turn took has its record and its audit row.
        """
        self._state.announced.setdefault(call_id, name)

    def abandoned_call(
        self,
        call_id: str,
        name: str,
        *,
        action: DecisionAction = "aborted",
        reason: str = "the turn was aborted",
    ) -> ToolCall:
        """The record of a call something kept from finishing (the turn's abort by default).

        A call whose run was interrupted keeps what it did (whether its handler ran, its
        decisions, how long it ran); a call that never started reads that it did not run.
        Either way the record carries a decision of ``action`` (``"aborted"``: the turn's
        abort or a cancellation; ``"failed"``: an error elsewhere, e.g. in its parallel batch)
        with ``reason``.
        """
        run = self._state.take_interrupted(call_id)
        if run is not None:
            return run.abandon(reason, action)
        return interrupted_record(call_id, name, action=action, reason=reason)

    def model_request(self) -> ModelRequest:
        """The request for this iteration's model call, as the built-in executor sends it.

        The system prompt, the history as views (not copies, ``pipeline/_history.py``), the
        definitions of the visible tools, the turn id, a read-only view of the turn's tools
        (for trust rendering), and an ``on_text_delta``
        that emits `ModelTextDelta` when somebody listens for it (None otherwise).
        """
        state = self._state
        view, bus = state.tools.view(), state.bus
        messages: Sequence[Message] = HistoryView(state.history_messages, state.messages)
        calls: Sequence[ToolCall] = HistoryView(state.history_calls, state.calls)
        if self._history_start:
            messages, calls = _window(messages, calls, self._history_start)
        return model_request(
            state.system_prompt,
            messages,
            calls,
            view.definitions,
            state.turn_id,
            view,
            _streamer(self) if bus.listening and bus.wants(ModelTextDelta) else None,
        )

    def keep_history_from(self, index: int) -> None:
        """From now on in this dispatch, requests show the conversation from message ``index``.

        `model_request` then holds ``ctx.messages[index:]`` and only the stored calls those
        messages announce (a call always travels with the message that announced it); the
        system prompt and the tools are unchanged, and nothing is removed from the turn or
        the store. ``0`` shows the whole conversation again. Context-window middleware
        (`middleware.ContextWindow`) calls it in ``dispatch_input``.

        Raises:
            ValueError: ``index`` is out of range, or not the index of a user message (a
                conversation sent to a provider begins with what the user said).
        """
        state = self._state
        messages = HistoryView(state.history_messages, state.messages)
        given: object = index
        count = len(messages)
        if isinstance(given, bool) or not isinstance(given, int) or not 0 <= index < max(count, 1):
            raise ValueError(f"index must be a message index below {count}, got {index!r}")
        if index and messages[index].role != "user":
            raise ValueError(f"message {index} is not a user message; a window starts at one")
        self._history_start = index

    def report_error(self, error: LoopError, stage: StageName) -> None:
        """Record ``error`` in the turn's errors and emit `ErrorReported` (the turn goes on)."""
        self._state.report(error, stage)

    # -- the signal ------------------------------------------------------------------------------
    @property
    def is_acked(self) -> bool:
        """True once `ack` was called."""
        return self._acked

    @property
    def is_nacked(self) -> bool:
        """True once `nack` was called."""
        return self._nacked

    @property
    def is_signalled(self) -> bool:
        """True once `ack` or `nack` was called."""
        return self._acked or self._nacked

    @property
    def is_stopped(self) -> bool:
        """True once the dispatch is acked or nacked, or its turn aborted."""
        return self._acked or self._nacked or self._state.aborted

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



def _window(
    messages: Sequence[Message], calls: Sequence[ToolCall], start: int
) -> tuple[tuple[Message, ...], tuple[ToolCall, ...]]:
    """The messages from ``start`` and the stored calls they announce (in storage order)."""
    kept = tuple(messages[start:])
    ids = {cid for message in kept for cid in message.tool_call_ids}
    return kept, tuple(call for call in calls if call.id in ids)


def _streamer(ctx: DispatchContext) -> Callable[[str], None]:
    """Emit each streamed piece of answer text as a `ModelTextDelta`."""
    turn_id, dispatch_id, iteration, emit = ctx.turn_id, ctx.dispatch_id, ctx.iteration, ctx.emit

    def on_text_delta(text: str) -> None:
        if text:
            emit(
                ModelTextDelta(
                    turn_id=turn_id, dispatch_id=dispatch_id, iteration=iteration, text=text
                )
            )

    return on_text_delta


DispatchContext.__module__ = "pipeline"
