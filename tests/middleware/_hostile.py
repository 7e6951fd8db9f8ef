"""A hostile model's harness for the enforcement tests: counted tools, scripted batches, verdicts.

The tools here count their real handler runs (with the argument they ran on), and `play` runs a
scripted turn while collecting what every layer decided about each call id: ``policy.decision``
logs, the handlers that started (`ToolExecutionStart`), the stash decisions and the audit rows.
Not collected by pytest (no ``test_`` prefix); imported by ``test_enforcement_*.py``.
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

from middleware import AuditLog, SqliteAuditSink
from pipeline import (
    DispatchContext,
    Log,
    ModelResponse,
    ProposedToolCall,
    SpooledArtifact,
    Tool,
    ToolCall,
    ToolExecutionStart,
    ToolLoopExecutor,
    TurnResult,
    TurnRunner,
)
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
    """What the model reads for a call to a name no visible tool has."""
    return f"Error: E_TOOL_NOT_FOUND: unknown tool {name!r}; available tools: {available}"


class Query(BaseModel):
    q: str


class Counted:
    """Tools whose handlers record each real execution as ``(tool, q)``, in start order.

    Handlers are async and yield once, so the calls of a parallel batch really interleave.
    """

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    def tool(self, name: str, *, long: bool = False, fails_on: str | None = None) -> Tool[Query]:
        """A tool named ``name``: ``long`` returns 50 lines; it raises (after starting) on
        ``q == fails_on``."""

        async def handler(args: Query, ctx: DispatchContext, meta: Any) -> str:
            self.runs.append((name, args.q))
            await asyncio.sleep(0)
            if args.q == fails_on:
                raise RuntimeError(f"{name} broke")
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
    logs: list[dict[str, Any]] = field(default_factory=list)
    """Payloads of the ``policy.decision`` logs, in emission order."""
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

    def decided(self) -> dict[str, list[tuple[str, str, bool | None]]]:
        """``call_id -> [(policy, action, ran)]`` from the logs (``ran`` None when not given)."""
        out: dict[str, list[tuple[str, str, bool | None]]] = {}
        for p in self.logs:
            if p.get("call_id") is not None:
                out.setdefault(p["call_id"], []).append((p["policy"], p["action"], p.get("ran")))
        return out

    def stash_decisions(self, policy: str) -> dict[str, list[str]]:
        """``call_id -> [action]`` from ``loopware.<policy>.decisions`` (per-call entries only)."""
        out: dict[str, list[str]] = {}
        for entry in self.result.stash["loopware"][policy].get("decisions", []):
            if entry["call_id"] is not None:
                out.setdefault(entry["call_id"], []).append(entry["action"])
        return out

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
    logs: list[dict[str, Any]] = []
    started: list[str] = []

    def keep(event: Log) -> None:
        if event.kind == "policy.decision":
            logs.append(dict(event.payload))

    runner.on(Log, keep)
    runner.on(ToolExecutionStart, lambda event: started.append(event.call_id))
    try:
        result = await runner.run("go")
    finally:
        if sink is not None:
            sink.close()
    return Played(result, model, logs, started)


def audit_rows(path: Path) -> dict[str, tuple[str | None, str | None, bool]]:
    """``call_id -> (decision, policy, is_error)`` of the tool-call rows in the chain at ``path``.

    The chain must verify intact.
    """
    sink = SqliteAuditSink(path, synchronous="normal")
    try:
        assert sink.verify() is None
        return {
            row.entry.call_id: (row.entry.decision, row.entry.policy, row.entry.is_error)
            for row in sink.rows()
            if row.entry.kind == "tool_call" and row.entry.call_id is not None
        }
    finally:
        sink.close()
