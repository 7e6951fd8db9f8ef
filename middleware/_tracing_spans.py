"""What `Tracing` keeps per turn: the open spans, their parent contexts, and how they end.

Attribute names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``, now kept in
the ``semantic-conventions-genai`` repository); they are spelled out here rather than imported
from ``opentelemetry-semantic-conventions``, whose ``_incubating`` module marks them moved and
which ``opentelemetry-api`` alone does not install. loopware's own attributes live under
``loopware.*``.

Nothing here imports OpenTelemetry at run time: `Tracing` imports it lazily (the ``otel`` extra)
and hands the pieces in.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from pipeline.artifacts import SpooledArtifact
from pipeline.calls import Decision, ToolCall, ToolDecision
from pipeline.errors import LoopError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

__all__ = [
    "ERROR_TYPE",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "LW_DECISION",
    "LW_DECISION_ACTION",
    "LW_DECISION_POLICY",
    "LW_DECISION_REASON",
    "LW_DECISION_WHEN",
    "LW_DISPATCH_ID",
    "LW_DISPATCH_ITERATIONS",
    "LW_DISPATCH_STATUS",
    "LW_INCOMPLETE",
    "LW_ITERATION",
    "LW_MIDDLEWARE_NAME",
    "LW_MIDDLEWARE_SELF_MS",
    "LW_MIDDLEWARE_TOTAL_MS",
    "LW_STAGE",
    "LW_TOOL_CHECKSUM",
    "LW_TOOL_DECISION",
    "LW_TOOL_DURATION_MS",
    "LW_TOOL_RAN",
    "LW_TOOL_VERDICT",
    "LW_TURN_ID",
    "LW_TURN_STATUS",
    "Fail",
    "ToolSpan",
    "TurnSpans",
    "decision_attributes",
    "describe",
    "error_of",
    "message_json",
    "timing_of",
    "to_ns",
    "tool_decision_attributes",
]

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"

LW_TURN_ID: Final = "loopware.turn.id"
LW_TURN_STATUS: Final = "loopware.turn.status"
LW_DISPATCH_ID: Final = "loopware.dispatch.id"
LW_DISPATCH_STATUS: Final = "loopware.dispatch.status"
LW_DISPATCH_ITERATIONS: Final = "loopware.dispatch.iterations"
LW_ITERATION: Final = "loopware.iteration"
LW_STAGE: Final = "loopware.stage"
LW_MIDDLEWARE_NAME: Final = "loopware.middleware.name"
LW_MIDDLEWARE_SELF_MS: Final = "loopware.middleware.self_ms"
LW_MIDDLEWARE_TOTAL_MS: Final = "loopware.middleware.total_ms"
LW_TOOL_CHECKSUM: Final = "loopware.tool.checksum"
LW_TOOL_VERDICT: Final = "loopware.tool.verdict"
"""The call's verdict (`ToolCall.verdict`), on its tool span."""
LW_TOOL_RAN: Final = "loopware.tool.ran"
"""Whether the call's handler ran (`ToolCall.ran`), on its tool span."""
LW_TOOL_DURATION_MS: Final = "loopware.tool.duration_ms"
"""How long the handler ran (`ToolCall.duration_ms`), on its tool span when it ran."""
LW_INCOMPLETE: Final = "loopware.incomplete"
"""Set (True) on a span that its turn ended before its own end event arrived."""

LW_DECISION: Final = "loopware.decision"
"""The name of a span event for one `Decision` about a call, on the call's tool span."""
LW_TOOL_DECISION: Final = "loopware.tool_decision"
"""The name of a span event for one `ToolDecision` (a tool hidden or withdrawn), on the span
of the iteration (or the turn) it was taken in."""
LW_DECISION_POLICY: Final = "loopware.decision.policy"
LW_DECISION_ACTION: Final = "loopware.decision.action"
LW_DECISION_REASON: Final = "loopware.decision.reason"
LW_DECISION_WHEN: Final = "loopware.decision.when"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
_MAX_DESCRIPTION: Final = 1024
_ERROR_CODE: Final = re.compile(r"(?:Error: )?(E_[A-Z0-9_]+): ")

Fail = Callable[["Span", str, str], None]
"""``fail(span, error_type, description)``: mark a span as failed (status ERROR)."""


def to_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exactly (integer arithmetic; naive times count as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return ((moment - _EPOCH) // _MICROSECOND) * 1000


def message_json(role: str, text: str, *, finish_reason: str | None = None) -> str:
    """One text message in the GenAI messages JSON shape (``[{"role", "parts": [...]}]``)."""
    message: dict[str, object] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return json.dumps([message], ensure_ascii=False)


def decision_attributes(decision: Decision) -> dict[str, Any]:
    """The attributes of a `LW_DECISION` span event: who decided what, why, and when."""
    return {
        LW_DECISION_POLICY: decision.policy,
        LW_DECISION_ACTION: decision.action,
        LW_DECISION_REASON: decision.reason,
        LW_DECISION_WHEN: decision.when,
    }


def tool_decision_attributes(decision: ToolDecision) -> dict[str, Any]:
    """The attributes of a `LW_TOOL_DECISION` span event (the call id when a call led to it)."""
    attributes: dict[str, Any] = {
        GEN_AI_TOOL_NAME: decision.tool,
        LW_DECISION_POLICY: decision.policy,
        LW_DECISION_ACTION: decision.action,
        LW_DECISION_REASON: decision.reason,
    }
    if decision.call_id is not None:
        attributes[GEN_AI_TOOL_CALL_ID] = decision.call_id
    return attributes


def timing_of(payload: Mapping[str, Any]) -> tuple[str, str, float, float] | None:
    """``(middleware, stage, self_ms, total_ms)`` from a ``middleware.timing`` log payload.

    None when the payload is not what the timing adapter writes (nothing reliable to draw).
    """
    name, stage = payload.get("middleware"), payload.get("stage")
    self_ms, total_ms = payload.get("self_ms"), payload.get("total_ms")
    if (
        isinstance(name, str)
        and isinstance(stage, str)
        and isinstance(self_ms, int | float)
        and isinstance(total_ms, int | float)
        and math.isfinite(self_ms)
        and math.isfinite(total_ms)
    ):
        return name, stage, float(self_ms), float(total_ms)
    return None


def describe(text: str) -> str:
    """A span status description: ``text``, cut to a sane length."""
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1] + "…"


def error_of(error: LoopError | None, fallback: str) -> tuple[str, str]:
    """The ``error.type`` and status description for a loopware error (or a fallback)."""
    if error is None:
        return "_OTHER", fallback
    return error.code, describe(str(error))


class ToolSpan:
    """A tool span between `ToolExecutionStart` and the stored call that names it."""

    __slots__ = ("end_ns", "failed", "span")

    def __init__(self, span: Span) -> None:
        """Wrap a started tool span (still running)."""
        self.span = span
        self.end_ns: int | None = None
        """When the handler finished (`ToolExecutionEnd`); None while it runs."""
        self.failed = False
        """True when the handler raised."""

    def __repr__(self) -> str:
        """Show whether the handler finished."""
        return f"ToolSpan(running={self.end_ns is None}, failed={self.failed})"

    def finish(self, fail: Fail, call: ToolCall, capture: bool, end_ns: int) -> None:
        """End the span with its stored record.

        The call id, its verdict, whether it ran and for how long, each decision (a
        `LW_DECISION` event), the result when payloads are captured, and a failure.
        """
        span = self.span
        span.set_attribute(GEN_AI_TOOL_CALL_ID, call.id)
        span.set_attribute(LW_TOOL_VERDICT, call.verdict)
        span.set_attribute(LW_TOOL_RAN, call.ran)
        if call.duration_ms is not None:
            span.set_attribute(LW_TOOL_DURATION_MS, call.duration_ms)
        for decision in call.decisions:
            span.add_event(LW_DECISION, decision_attributes(decision), timestamp=end_ns)
        if capture:
            result = _result_text(call)
            if result is not None:
                span.set_attribute(GEN_AI_TOOL_CALL_RESULT, result)
        if self.failed or call.is_error:
            text = call.results if isinstance(call.results, str) else None
            found = _ERROR_CODE.match(text) if text is not None else None
            fail(
                span,
                found.group(1) if found else "_OTHER",
                describe(text.removeprefix("Error: ")) if text else "the tool call failed",
            )
        span.end(end_time=end_ns)

    def abandon(self, fail: Fail, end_ns: int, *, aborted: bool) -> None:
        """End a span whose call was never stored (its turn aborted, or a custom executor).

        A handler that never finished, or that raised while its turn was being aborted (it was
        cancelled), is marked ``loopware.incomplete``; one that raised otherwise is an error.
        """
        span = self.span
        if self.end_ns is None or (self.failed and aborted):
            span.set_attribute(LW_INCOMPLETE, True)
        elif self.failed:
            fail(span, "_OTHER", "the tool handler raised")
        span.end(end_time=self.end_ns if self.end_ns is not None else end_ns)


def _result_text(call: ToolCall) -> str | None:
    results = call.results
    if isinstance(results, str):
        return results
    if isinstance(results, SpooledArtifact) and call.inline:
        return results.as_string()
    return None  # a large artifact or media: too big (or not text) for an attribute


class TurnSpans:
    """The open spans of one turn; everything is dropped when the turn ends.

    Tool spans are keyed by the events' ``call_id`` (the provider's id of the call):
    ``running`` between `ToolExecutionStart` and `ToolExecutionEnd`, then ``finished`` until
    the stored `ToolCall` with that id gives the span its result. Identical calls in one batch
    have their own ids, so each span meets its own record. Spans whose call was not stored by
    the end of their iteration become ``orphans``, ended when the dispatch (or turn) ends and
    it is known whether the turn was aborted.
    """

    __slots__ = (
        "dispatch",
        "dispatch_ctx",
        "dispatch_id",
        "finished",
        "iteration",
        "iteration_ctx",
        "iteration_no",
        "orphans",
        "running",
        "spanned",
        "turn",
        "turn_ctx",
    )

    def __init__(self, turn: Span, turn_ctx: Context) -> None:
        """Start the state of a turn whose span is ``turn``."""
        self.turn = turn
        self.turn_ctx = turn_ctx
        self.dispatch: Span | None = None
        self.dispatch_ctx: Context | None = None
        self.dispatch_id: str | None = None
        self.iteration: Span | None = None
        self.iteration_ctx: Context | None = None
        self.iteration_no: int | None = None
        self.running: dict[str, list[ToolSpan]] = {}
        self.finished: dict[str, list[ToolSpan]] = {}
        self.orphans: list[ToolSpan] = []
        self.spanned: set[str] = set()
        """Ids of stored calls that already have a span (a mutated call gets no second one)."""

    def __repr__(self) -> str:
        """Show what is open."""
        return (
            f"TurnSpans(dispatch={self.dispatch_id!r}, iteration={self.iteration_no}, "
            f"running_tools={sum(map(len, self.running.values()))}, "
            f"finished_tools={sum(map(len, self.finished.values()))}, "
            f"orphans={len(self.orphans)})"
        )

    def inner_ctx(self) -> Context:
        """The parent of a span inside the loop: the iteration, else the dispatch, else the turn."""
        return self.iteration_ctx or self.dispatch_ctx or self.turn_ctx

    def inner_span(self) -> Span:
        """The innermost open span of the loop (iteration, dispatch or turn)."""
        return self.iteration or self.dispatch or self.turn

    @staticmethod
    def take(spans: dict[str, list[ToolSpan]], key: str) -> ToolSpan | None:
        """Remove and return the oldest tool span under ``key`` (None when there is none)."""
        queue = spans.get(key)
        if not queue:
            return None
        tool = queue.pop(0)
        if not queue:
            del spans[key]
        return tool

    def close_iteration(self, end_ns: int, *, incomplete: bool) -> None:
        """End the iteration span, if one is open; its unstored tool spans become orphans."""
        for spans in (self.finished, self.running):
            for queue in spans.values():
                self.orphans.extend(queue)
            spans.clear()
        span = self.iteration
        if span is None:
            return
        if incomplete:
            span.set_attribute(LW_INCOMPLETE, True)
        span.end(end_time=end_ns)
        self.iteration = self.iteration_ctx = self.iteration_no = None

    def close_orphans(self, fail: Fail, end_ns: int, *, aborted: bool) -> None:
        """End the orphaned tool spans (see `ToolSpan.abandon`)."""
        for tool in self.orphans:
            tool.abandon(fail, end_ns, aborted=aborted)
        self.orphans.clear()

    def close_dispatch(self, fail: Fail, end_ns: int, *, aborted: bool) -> None:
        """End whatever is still open below the turn, as incomplete (its end events never came)."""
        self.close_iteration(end_ns, incomplete=True)
        self.close_orphans(fail, end_ns, aborted=aborted)
        span = self.dispatch
        if span is None:
            return
        span.set_attribute(LW_INCOMPLETE, True)
        span.end(end_time=end_ns)
        self.dispatch = self.dispatch_ctx = None
