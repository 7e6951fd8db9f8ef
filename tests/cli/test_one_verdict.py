"""One call, one verdict: ``loopware run``, replay and tracing label every call the same way.

The hostile turn of ``tests/data/hostile_turn.py`` (a policy's deny, an unknown tool, arguments
failing the schema, arguments that are not JSON, a blocked repeat, a limit hiding a tool and a
call to it, an approval said no) is run three ways: traced by `Tracing`, printed live by
``loopware run`` (against a scripted model), and replayed from the transcript the traced turn
would have been recorded as, against the same tools and stack. Every call must read the same
verdict, the same deciding policy and the same ``ran`` in all three, and the tool the limit hid
must be hidden by the same call.
"""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopware_cli._run import RunOptions, run_model_turn
from middleware import Tracing
from middleware.transcripts import CallOutcome, ReplayReport, replay
from pipeline import ToolLoopExecutor, TurnResult, TurnRunner
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.testing import ScriptedModel
from tests.data.hostile_turn import CALLS, USER_INPUT, script, stack, tools

HOSTILE = "tests.data.hostile_turn"
CASES = [(cid, name, verdict) for cid, name, _, verdict in CALLS]
CASE_IDS = {
    "c1": "allowed",
    "c2": "policy-deny",
    "c3": "unknown-tool",
    "c4": "schema-invalid",
    "c5": "not-json",
    "c6": "repeat-blocked",
    "c7": "limit-used-up",
    "c8": "hidden-tool",
    "c9": "approval-rejected",
}
DECISION = re.compile(r"^    decision: (?P<verdict>\w+)(?: - .* \[(?P<policy>[\w.]+)\])?$")


@dataclass(frozen=True)
class ThreeWays:
    """The hostile turn traced, printed live by ``loopware run``, and replayed."""

    result: TurnResult
    """The traced turn's result (its records are the fact the three must show)."""
    spans: list[ReadableSpan]
    """The traced turn's finished spans."""
    printed: dict[str, tuple[str, str, str | None]]
    """Per call id: the tool, verdict and deciding policy ``loopware run`` printed."""
    lines: list[str]
    """``loopware run``'s output."""
    report: ReplayReport
    """The replay of the transcript the traced turn would have been recorded as."""

    def span(self, call_id: str) -> ReadableSpan:
        [span] = [
            s
            for s in self.spans
            if s.name.startswith("execute_tool ")
            and (s.attributes or {}).get("gen_ai.tool.call.id") == call_id
        ]
        return span

    def record(self, call_id: str) -> ToolCall:
        [call] = [c for c in self.result.tool_calls if c.id == call_id]
        return call

    def outcome(self, call_id: str) -> CallOutcome:
        [outcome] = [c for c in self.report.calls if c.call.id == call_id]
        return outcome


def traced() -> tuple[TurnResult, list[ReadableSpan]]:
    """Run the hostile turn under `Tracing`; its result and its finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(script())),
        tools=tools(),
        middleware=[*stack(), Tracing(provider)],
    )
    result = asyncio.run(runner.run(USER_INPUT))
    return result, list(exporter.get_finished_spans())


def text_of(call: ToolCall) -> str:
    results = call.results
    return results.as_string() if isinstance(results, SpooledArtifact) else str(results)


def transcript_of(result: TurnResult) -> list[dict[str, Any]]:
    """The turn as an OpenAI chat-completions transcript: what a recorder would have kept."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": USER_INPUT}]
    for (cid, name, arguments, _), call in zip(CALLS, result.tool_calls, strict=True):
        function = {"name": name, "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [{"id": cid, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": cid, "content": text_of(call)})
    messages.append({"role": "assistant", "content": result.output})
    return messages


def live() -> tuple[dict[str, tuple[str, str, str | None]], list[str]]:
    """``loopware run``'s output for the hostile turn: per call id (one call per iteration, in
    order), its tool, verdict and deciding policy as printed; and the output's lines."""
    out, err = io.StringIO(), io.StringIO()
    options = RunOptions(
        prompt=USER_INPUT,
        model="scripted",
        tools=[f"{HOSTILE}:tools"],
        middleware=[f"{HOSTILE}:stack"],
        plain=True,
    )
    assert run_model_turn(options, ScriptedModel(script()), out, err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    calls: list[tuple[str, str, str | None]] = []
    for i, line in enumerate(lines):
        match = DECISION.match(line)
        if match is not None:
            tool = lines[i - 2].split()[0]  # the call's line, then its result or error
            calls.append((tool, match["verdict"], match["policy"]))
    assert len(calls) == len(CALLS)
    return {cid: call for (cid, _, _, _), call in zip(CALLS, calls, strict=True)}, lines


@pytest.fixture(scope="module")
def three_ways() -> ThreeWays:
    """Run the hostile turn the three ways, once for every test here."""
    result, spans = traced()
    printed, lines = live()
    report = replay(transcript_of(result), stack(), tools=tools())
    return ThreeWays(result, spans, printed, lines, report)


@pytest.mark.parametrize(("call_id", "tool", "verdict"), CASES, ids=list(CASE_IDS.values()))
def test_run_replay_and_tracing_show_the_same_verdict_for_the_same_call(
    three_ways: ThreeWays, call_id: str, tool: str, verdict: str
) -> None:
    """The call reads the verdict ``CALLS`` names in its record, ``loopware run``'s decision
    line, its tool span and the replay report, decided by the same policy and run (or not)
    alike; the span's decision events are the record's decisions."""
    record = three_ways.record(call_id)
    deciding = record.deciding
    policy = None if deciding is None else deciding.policy
    assert (record.tool, record.verdict) == (tool, verdict)  # the fact itself

    assert three_ways.printed[call_id] == (tool, verdict, policy)

    span = three_ways.span(call_id)
    attributes = span.attributes or {}
    assert (attributes["loopware.tool.verdict"], attributes["loopware.tool.ran"]) == (
        verdict,
        record.ran,
    )
    events = [dict(e.attributes or {}) for e in span.events if e.name == "loopware.decision"]
    assert [(e["loopware.decision.policy"], e["loopware.decision.action"]) for e in events] == [
        (d.policy, d.action) for d in record.decisions
    ]

    outcome = three_ways.outcome(call_id)
    assert outcome.stored is not None
    replayed = outcome.stored.deciding
    assert (outcome.verdict, outcome.ran) == (verdict, record.ran)
    assert (None if replayed is None else replayed.policy) == policy
    assert record.ran is (verdict == "allowed")  # every refusal here is before the handler


def test_the_tool_a_limit_hid_is_hidden_by_the_same_call_everywhere(
    three_ways: ThreeWays,
) -> None:
    """The search that used up its limit (c7) hid ``search``: its record's turn says so, the
    live output prints it under that call, the replay lists it with that call and the trace
    has it as an iteration event naming that call."""
    [hidden] = three_ways.result.tool_decisions[1:]  # after the shell withdrawn at the start
    assert (hidden.tool, hidden.action, hidden.call_id) == ("search", "hidden", "c7")
    lines = three_ways.lines
    seventh = lines.index('  search {"q": "refund policy"}')
    assert lines[seventh + 3] == (
        "    then: tool search hidden - limit reached: its limit of 1 run per turn is used up "
        "[loopware.limit]"
    )
    hid = [(c.call.id, d.tool, d.action) for c in three_ways.report.calls for d in c.tool_decisions]
    assert hid == [("c7", "search", "hidden")]
    events = [
        dict(e.attributes or {})
        for s in three_ways.spans
        if s.name == "loopware.iteration"
        for e in s.events
        if e.name == "loopware.tool_decision"
    ]
    assert [(e["gen_ai.tool.name"], e["gen_ai.tool.call.id"]) for e in events] == [("search", "c7")]
