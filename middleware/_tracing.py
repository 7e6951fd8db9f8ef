"""`Tracing`: OpenTelemetry spans for turns, dispatches, iterations, tools and middleware.

`Tracing` is an event observer, like `AuditLog`: hand it to ``TurnRunner(middleware=[...])`` and
it subscribes to the runner's events, so no short-circuiting middleware can skip it. It turns
them into one span tree per turn::

    invoke_agent                              TurnStart .. TurnEnd
    ├── loopware.middleware <name>            turn_input / turn_output middleware (timed=True)
    └── loopware.dispatch                     DispatchStart .. DispatchEnd
        └── loopware.iteration                IterationStart .. IterationEnd, one per iteration
            ├── loopware.middleware <name>    dispatch middleware (timed=True)
            └── execute_tool <tool name>      ToolExecutionStart .. ToolExecutionEnd

Every span below the turn gets an explicit parent (concurrent turns interleave on one event
loop, so the ambient context cannot be trusted); the turn span itself joins whatever span is
current where the turn runs (a web request's span, say). Spans take their start and end times
from the events. What a tool span says about its call comes from the call's stored record
(`ToolCallStored`): its verdict, whether it ran, each decision; a tool hidden or withdrawn is
an event on the iteration's span (`ToolDecided`). It needs OpenTelemetry:
``pip install 'loopware[otel]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pipeline import canonical_json
from pipeline.errors import InvalidMiddlewareConfigError, MissingExtraError
from pipeline.events import (
    DispatchEnd,
    DispatchStart,
    ErrorReported,
    IterationEnd,
    IterationStart,
    Log,
    MessageStored,
    ToolCallStored,
    ToolDecided,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from pipeline.stages import EventSource

from ._tracing_spans import (
    ERROR_TYPE,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    LW_DISPATCH_ID,
    LW_DISPATCH_ITERATIONS,
    LW_DISPATCH_STATUS,
    LW_ITERATION,
    LW_MIDDLEWARE_NAME,
    LW_MIDDLEWARE_SELF_MS,
    LW_MIDDLEWARE_TOTAL_MS,
    LW_STAGE,
    LW_TOOL_CHECKSUM,
    LW_TOOL_DECISION,
    LW_TURN_ID,
    LW_TURN_STATUS,
    ToolSpan,
    TurnSpans,
    error_of,
    message_json,
    timing_of,
    to_ns,
    tool_decision_attributes,
)

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

__all__ = ["Tracing"]

_TURN_STAGES: Final = frozenset({"turn_input", "turn_output"})


def _loopware_version() -> str | None:
    # importlib.metadata loads with the first tracer, not on import (docs/architecture.md,
    # "Import time")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopware")
    except PackageNotFoundError:
        return None


class Tracing:
    """Emits OpenTelemetry spans for every turn the runner runs (extra ``otel``).

    Spans (all ``INTERNAL``): ``invoke_agent`` per turn (``gen_ai.operation.name``,
    ``gen_ai.conversation.id`` when set, ``loopware.turn.id``, ``loopware.turn.status``);
    ``loopware.dispatch`` under it (``loopware.dispatch.id``, ``.status``, ``.iterations``);
    ``loopware.iteration`` per iteration (``loopware.iteration``); ``execute_tool <name>`` per
    tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``,
    ``loopware.tool.checksum``, and from the call's record ``loopware.tool.verdict``,
    ``loopware.tool.ran`` and ``loopware.tool.duration_ms``), including calls refused before
    their handler ran (denied, rejected, bad arguments, unknown tool); and
    ``loopware.middleware <name>`` for each run of a middleware
    registered with ``timed=True`` (``loopware.middleware.name``, ``loopware.stage``,
    ``loopware.middleware.self_ms`` / ``.total_ms``). Middleware registered without
    ``timed=True`` get no span: their timing log is what the span is built from.

    Errors set status ERROR and ``error.type`` (the loopware error code, ``E_...``, or
    ``_OTHER`` when a failed call's text names none): a reported error
    (`ErrorReported`, also recorded as an ``exception`` event) on the span of its stage, a failed
    turn on the turn span, a nacked dispatch on the dispatch span, an error tool call on its
    tool span. An aborted turn is not an error. Each decision on a call's record is a
    ``loopware.decision`` event on its tool span (``loopware.decision.policy``, ``.action``,
    ``.reason``, ``.when``); each decision about a tool (`ToolDecided`: hidden, withdrawn) is a
    ``loopware.tool_decision`` event on the iteration (or turn) span, with the tool's name and
    the call that led to it. A turn that ends early still ends every span it opened
    (those get ``loopware.incomplete=True``), and nothing is kept once a turn has ended.

    Args:
        tracer_provider: Where spans go; ``None`` uses the global provider.
        capture_payloads: Record the user input (``gen_ai.input.messages``), the final answer
            (``gen_ai.output.messages``), tool arguments and text results
            (``gen_ai.tool.call.arguments`` / ``.result``). Off by default: they may hold
            personal data.

    Raises:
        InvalidMiddlewareConfigError: OpenTelemetry is not installed (install the ``otel``
            extra), ``tracer_provider`` has no ``get_tracer``, or ``capture_payloads`` is not a
            bool.
    """

    __slots__ = ("_capture", "_error", "_in_context", "_provider", "_status", "_tracer", "_turns")

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, capture_payloads: bool = False
    ) -> None:
        """Check the options and get a tracer (see the class docstring)."""
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise MissingExtraError(
                extra="otel", package="opentelemetry", needed_by="Tracing"
            ) from exc
        given: object = tracer_provider
        if given is not None and not callable(getattr(given, "get_tracer", None)):
            raise InvalidMiddlewareConfigError(
                f"Tracing: tracer_provider must be an OpenTelemetry TracerProvider, got {given!r}",
                option="tracer_provider",
            )
        if not isinstance(capture_payloads, bool):
            raise InvalidMiddlewareConfigError(
                f"Tracing: capture_payloads must be a bool, got {capture_payloads!r}",
                option="capture_payloads",
            )
        self._provider = tracer_provider
        self._capture = capture_payloads
        self._tracer: Tracer = trace.get_tracer(
            "loopware", _loopware_version(), tracer_provider=tracer_provider
        )
        self._in_context: Callable[[Span], Context] = trace.set_span_in_context
        self._status: type[Status] = trace.Status
        self._error: StatusCode = trace.StatusCode.ERROR
        self._turns: dict[str, TurnSpans] = {}

    def __repr__(self) -> str:
        """Show the provider, the payload option and how many turns are in flight."""
        provider = "global" if self._provider is None else repr(self._provider)
        return (
            f"Tracing(tracer_provider={provider}, capture_payloads={self._capture}, "
            f"turns_in_flight={len(self._turns)})"
        )

    @property
    def capture_payloads(self) -> bool:
        """True when inputs, answers, tool arguments and results are recorded on spans."""
        return self._capture

    def observe(self, events: EventSource) -> None:
        """Subscribe to ``events`` (the runner calls this when the tracer is handed to it)."""
        events.on(TurnStart, self._on_turn_start)
        events.on(TurnEnd, self._on_turn_end)
        events.on(DispatchStart, self._on_dispatch_start)
        events.on(DispatchEnd, self._on_dispatch_end)
        events.on(IterationStart, self._on_iteration_start)
        events.on(IterationEnd, self._on_iteration_end)
        events.on(ToolExecutionStart, self._on_tool_start)
        events.on(ToolExecutionEnd, self._on_tool_end)
        events.on(ToolCallStored, self._on_call_stored)
        events.on(ToolDecided, self._on_tool_decided)
        events.on(ErrorReported, self._on_error)
        events.on(Log, self._on_log)
        if self._capture:
            events.on(MessageStored, self._on_message)

    # -- helpers -----------------------------------------------------------------------------
    def _start(
        self, name: str, parent: Context | None, attributes: dict[str, Any], start_ns: int
    ) -> Span:
        return self._tracer.start_span(
            name, context=parent, attributes=attributes, start_time=start_ns
        )

    def _fail(self, span: Span, error_type: str, description: str) -> None:
        span.set_attribute(ERROR_TYPE, error_type)
        span.set_status(self._status(self._error, description))

    # -- turn and dispatch -------------------------------------------------------------------
    def _on_turn_start(self, event: TurnStart) -> None:
        stale = self._turns.pop(event.turn_id, None)
        if stale is not None:  # a repeated TurnStart: never leave the first one's spans open
            self._close_turn(stale, to_ns(event.timestamp), aborted=True)
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: "invoke_agent",
            LW_TURN_ID: event.turn_id,
        }
        if event.conversation_id is not None:
            attributes[GEN_AI_CONVERSATION_ID] = event.conversation_id
        if self._capture:
            attributes[GEN_AI_INPUT_MESSAGES] = message_json("user", event.input)
        # no explicit parent: the turn joins the caller's current span, if any
        span = self._start("invoke_agent", None, attributes, to_ns(event.timestamp))
        self._turns[event.turn_id] = TurnSpans(span, self._in_context(span))

    def _close_turn(self, state: TurnSpans, end_ns: int, *, aborted: bool) -> None:
        state.close_dispatch(self._fail, end_ns, aborted=aborted)
        state.turn.end(end_time=end_ns)

    def _on_turn_end(self, event: TurnEnd) -> None:
        state = self._turns.pop(event.turn_id, None)
        if state is None:
            return
        span = state.turn
        span.set_attribute(LW_TURN_STATUS, event.status)
        if event.status == "failed":
            self._fail(span, *error_of(event.error, "the turn failed"))
        self._close_turn(state, to_ns(event.timestamp), aborted=event.status == "aborted")

    def _on_dispatch_start(self, event: DispatchStart) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        start_ns = to_ns(event.timestamp)
        state.close_dispatch(self._fail, start_ns, aborted=False)
        attributes = {LW_TURN_ID: event.turn_id, LW_DISPATCH_ID: event.dispatch_id}
        span = self._start("loopware.dispatch", state.turn_ctx, attributes, start_ns)
        state.dispatch, state.dispatch_ctx = span, self._in_context(span)
        state.dispatch_id = event.dispatch_id

    def _on_dispatch_end(self, event: DispatchEnd) -> None:
        state = self._turns.get(event.turn_id)
        if state is None or state.dispatch is None:
            return
        end_ns = to_ns(event.timestamp)
        state.close_iteration(end_ns, incomplete=True)
        state.close_orphans(self._fail, end_ns, aborted=event.status == "aborted")
        span = state.dispatch
        span.set_attribute(LW_DISPATCH_STATUS, event.status)
        span.set_attribute(LW_DISPATCH_ITERATIONS, event.iterations)
        if event.status == "nack":
            self._fail(span, *error_of(event.error, "the dispatch was nacked"))
        span.end(end_time=end_ns)
        state.dispatch = state.dispatch_ctx = None

    # -- iterations --------------------------------------------------------------------------
    def _on_iteration_start(self, event: IterationStart) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        start_ns = to_ns(event.timestamp)
        state.close_iteration(start_ns, incomplete=True)
        attributes = {
            LW_TURN_ID: event.turn_id,
            LW_DISPATCH_ID: event.dispatch_id,
            LW_ITERATION: event.iteration,
        }
        parent = state.dispatch_ctx or state.turn_ctx
        span = self._start("loopware.iteration", parent, attributes, start_ns)
        state.iteration, state.iteration_ctx = span, self._in_context(span)
        state.iteration_no = event.iteration

    def _on_iteration_end(self, event: IterationEnd) -> None:
        state = self._turns.get(event.turn_id)
        if state is not None and state.iteration_no == event.iteration:
            state.close_iteration(to_ns(event.timestamp), incomplete=False)

    # -- tools -------------------------------------------------------------------------------
    def _on_tool_start(self, event: ToolExecutionStart) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: "execute_tool",
            GEN_AI_TOOL_NAME: event.tool_name,
            GEN_AI_TOOL_TYPE: "function",
            LW_TURN_ID: event.turn_id,
            LW_TOOL_CHECKSUM: event.checksum,
            GEN_AI_TOOL_CALL_ID: event.call_id,
        }
        if self._capture:
            dump = getattr(event.args, "model_dump_json", None)
            if callable(dump):
                attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = dump()
        span = self._start(
            f"execute_tool {event.tool_name}",
            state.inner_ctx(),
            attributes,
            to_ns(event.started_at),
        )
        state.running.setdefault(event.call_id, []).append(ToolSpan(span))

    def _on_tool_end(self, event: ToolExecutionEnd) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        tool = state.take(state.running, event.call_id)
        if tool is None:
            return
        tool.end_ns = to_ns(event.timestamp)
        tool.failed = event.is_error
        state.finished.setdefault(event.call_id, []).append(tool)

    def _on_call_stored(self, event: ToolCallStored) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        call = event.call
        tool = state.take(state.finished, call.id)
        if tool is not None:
            end_ns = tool.end_ns if tool.end_ns is not None else to_ns(event.timestamp)
            tool.finish(self._fail, call, self._capture, end_ns)
        elif call.id not in state.spanned:
            # stored without running a handler (bad arguments, unknown tool, custom executor)
            attributes: dict[str, Any] = {
                GEN_AI_OPERATION_NAME: "execute_tool",
                GEN_AI_TOOL_NAME: call.tool,
                GEN_AI_TOOL_TYPE: "function",
                LW_TURN_ID: event.turn_id,
                LW_TOOL_CHECKSUM: call.checksum,
            }
            if self._capture:
                attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = canonical_json(call.args)
            end_ns = to_ns(event.timestamp)
            start_ns = min(to_ns(call.created_at), end_ns)
            span = self._start(f"execute_tool {call.tool}", state.inner_ctx(), attributes, start_ns)
            ToolSpan(span).finish(self._fail, call, self._capture, end_ns)
        state.spanned.add(call.id)

    def _on_tool_decided(self, event: ToolDecided) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        state.inner_span().add_event(
            LW_TOOL_DECISION,
            tool_decision_attributes(event.decision),
            timestamp=to_ns(event.timestamp),
        )

    # -- errors, logs, messages --------------------------------------------------------------
    def _on_error(self, event: ErrorReported) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        span = state.turn if event.stage in _TURN_STAGES else state.inner_span()
        error = event.error
        span.record_exception(
            error,
            attributes={LW_STAGE: event.stage, ERROR_TYPE: error.code},
            timestamp=to_ns(event.timestamp),
        )
        self._fail(span, *error_of(error, ""))

    def _on_log(self, event: Log) -> None:
        if event.kind == "middleware.timing":
            self._middleware_span(event)

    def _middleware_span(self, event: Log) -> None:
        state = self._turns.get(event.turn_id)
        if state is None:
            return
        timing = timing_of(event.payload)
        if timing is None:
            return
        name, stage, self_ms, total_ms = timing
        parent = state.turn_ctx if stage in _TURN_STAGES else state.inner_ctx()
        end_ns = to_ns(event.timestamp)
        attributes: dict[str, Any] = {
            LW_TURN_ID: event.turn_id,
            LW_MIDDLEWARE_NAME: name,
            LW_STAGE: stage,
            LW_MIDDLEWARE_SELF_MS: self_ms,
            LW_MIDDLEWARE_TOTAL_MS: total_ms,
        }
        start_ns = end_ns - max(0, round(total_ms * 1_000_000))
        span = self._start(f"loopware.middleware {name}", parent, attributes, start_ns)
        span.end(end_time=end_ns)

    def _on_message(self, event: MessageStored) -> None:
        message = event.message
        if message.role != "assistant" or message.tool_call_ids:
            return
        state = self._turns.get(event.turn_id)
        if state is not None:
            state.turn.set_attribute(
                GEN_AI_OUTPUT_MESSAGES,
                message_json("assistant", message.content, finish_reason="stop"),
            )


Tracing.__module__ = "middleware"
