"""A hostile model's harness for the enforcement tests: counted tools, scripted batches, verdicts.

The tools here count their real handler runs (with the argument they ran on), and `play` runs a
scripted turn while collecting what was decided about each call id (the decisions on its
record), the handlers that started (`ToolExecutionStart`), the decisions about tools and the
audit rows. Not collected by pytest (no ``test_`` prefix); imported by ``test_enforcement_*.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import DispatchContext, Tool, ToolLoopExecutor, TurnResult, TurnRunner
from pipeline.artifacts import SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.events import ToolExecutionStart
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.testing import ScriptedModel

LOOK_ALIKES = (
    "Search",
    "SEARCH",
    "search ",
    "\u0455earch",
    "\uff53\uff45\uff41\uff52\uff43\uff48",
    "search\u200b",
)
"""Names a model may try for ``search``: case, a trailing space, a Cyrillic dze (U+0455) for the
``s``, full width, a zero-width space."""


PARALLEL = pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
"""Run a test with the calls of each batch run one after the other, then concurrently."""


def unknown(name: str, available: str) -> str:
    """What the model reads for a call to a name no tool has (or one hidden without a word)."""
    return f"Error: E_TOOL_NOT_FOUND: unknown tool {name!r}; available tools: {available}"


def unavailable(name: str, policy: str, reason: str, available: str) -> str:
    """What the model reads for a call to a tool a policy hid or withdrew during the turn."""
    return (
        f"Error: E_TOOL_UNAVAILABLE: tool {name!r} is no longer available in this turn "
        f"({policy}: {reason}); available tools: {available}"
    )


def denied(policy: str, tool: str, reason: str, *, action: str = "denied") -> str:
    """What the model reads for a call a policy refused before it ran."""
    code = "E_CALL_REJECTED" if action == "rejected" else "E_CALL_DENIED"
    return f"Error: {code}: {policy} {action} the call to {tool!r}: {reason}; it was not run"


class Query(BaseModel):
    q: str


class Counted:
    """Tools whose handlers record each real execution as ``(tool, q)``, in start order.

    Handlers are async and yield once, so the calls of a parallel batch really interleave.
    """

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    def tool(
        self,
        name: str,
        *,
        long: bool = False,
        fails_on: str | None = None,
        bad_output_on: str | None = None,
    ) -> Tool[Query]:
        """A tool named ``name``: ``long`` returns 50 lines; it raises (after starting) on
        ``q == fails_on``, and returns an object that is no tool output on
        ``q == bad_output_on``."""

        async def handler(args: Query, ctx: DispatchContext, meta: Any) -> Any:
            self.runs.append((name, args.q))
            await asyncio.sleep(0)
            if args.q == fails_on:
                raise RuntimeError(f"{name} broke")
            if args.q == bad_output_on:
                return object()
            return f"{name} line {args.q}\n" * 50 if long else f"{name}: {args.q}"

        return Tool(name=name, description=f"The {name} tool.", input_schema=Query, handler=handler)

    def ran(self, name: str) -> list[str]:
        """The ``q`` of every run of ``name``, in start order."""
        return [q for tool, q in self.runs if tool == name]


def call(call_id: str, name: str, /, **args: Any) -> ProposedToolCall:
    """A proposed call with JSON-encoded arguments."""
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(args))


def batch(*calls: ProposedToolCall) -> ModelResponse:
    """One model step proposing ``calls`` together."""
    return ModelResponse(tool_calls=calls)


@dataclass
class Played:
    """A finished hostile turn and everything recorded about its calls."""

    result: TurnResult
    model: ScriptedModel
    started: list[str] = field(default_factory=list)
    """Call ids whose handler started (`ToolExecutionStart`), in order."""

    @property
    def calls(self) -> dict[str, ToolCall]:
        """The stored calls by id."""
        return {c.id: c for c in self.result.tool_calls}

    def read(self, call_id: str) -> str:
        """What the model reads for a call."""
        results = self.calls[call_id].results
        return results.as_string() if isinstance(results, SpooledArtifact) else str(results)

    def errors(self) -> list[str]:
        """Ids of the error calls, in storage order."""
        return [c.id for c in self.result.tool_calls if c.is_error]

    def decided(self) -> dict[str, list[tuple[str, str, str]]]:
        """``call_id -> [(policy, action, when)]``: the decisions on each record that has any."""
        return {
            c.id: [(d.policy, d.action, d.when) for d in c.decisions]
            for c in self.result.tool_calls
            if c.decisions
        }

    def verdicts(self) -> dict[str, tuple[str, bool]]:
        """``call_id -> (verdict, ran)`` of every stored call."""
        return {c.id: (c.verdict, c.ran) for c in self.result.tool_calls}

    def tools_decided(self) -> list[tuple[str, str, str, str | None]]:
        """``(tool, policy, action, call_id)`` of every decision about a tool, in order."""
        return [(d.tool, d.policy, d.action, d.call_id) for d in self.result.tool_decisions]

    def offered(self, step: int) -> list[str]:
        """The tool names offered to the model at model step ``step``."""
        return [t["name"] for t in self.model.requests[step].tools]


async def play(
    steps: Sequence[ModelResponse],
    tools: Sequence[Tool[Any]],
    middleware: Sequence[object],
    *,
    parallel: bool = False,
    inline_limit: int = 4096,
    audit: Path | None = None,
) -> Played:
    """Run one turn of ``steps`` (then ``"done"``); with ``audit``, also an `AuditLog` there."""
    model = ScriptedModel([*steps, ModelResponse(text="done")])
    stack = [*middleware]
    sink = None
    if audit is not None:
        sink = SqliteAuditSink(audit, synchronous="normal")
        stack.append(AuditLog(sink))
    runner = TurnRunner(
        executor=ToolLoopExecutor(model, parallel_tool_calls=parallel, inline_limit=inline_limit),
        tools=tools,
        middleware=stack,
    )
    started: list[str] = []
    runner.on(ToolExecutionStart, lambda event: started.append(event.call_id))
    try:
        result = await runner.run("go")
    finally:
        if sink is not None:
            sink.close()
    return Played(result, model, started)


def audit_rows(path: Path) -> dict[str, list[tuple[str | None, str | None, bool | None]]]:
    """``call_id -> [(decision, policy, ran)]``: every tool-call row of the chain at ``path``.

    A list per call id, so that a test sees a second row if one was written. The chain must
    verify intact.
    """
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        assert sink.verify()
        rows: dict[str, list[tuple[str | None, str | None, bool | None]]] = {}
        for row in sink.rows():
            entry = row.entry
            if entry.kind == "tool_call" and entry.call_id is not None:
                rows.setdefault(entry.call_id, []).append(
                    (entry.decision, entry.policy, entry.ran)
                )
        return rows
    finally:
        sink.close()


def audit_tool_rows(path: Path) -> list[tuple[str | None, str | None, str | None, str | None]]:
    """``(tool, decision, policy, call_id)`` of every row about a tool (``kind="tool"``)."""
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        assert sink.verify()
        return [
            (row.entry.tool, row.entry.decision, row.entry.policy, row.entry.call_id)
            for row in sink.rows()
            if row.entry.kind == "tool"
        ]
    finally:
        sink.close()
