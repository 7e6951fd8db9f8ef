"""Shared tools, models and helpers for the middleware tests (exposed as fixtures only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline import Tool, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall
from pipeline.events import Log
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall

from ._sinks import JsonlSinks, PostgresSinks, SinkBackend, SqliteSinks


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"results for {q}"


@tool
def fetch(url: str) -> str:
    """Fetch a URL."""
    return f"page {url}"


@tool
def poll(job: str) -> str:
    """Poll a job."""
    return "pending"


@tool
def shell_exec(cmd: str) -> str:
    """Run a shell command (never allowed)."""
    raise AssertionError("the denied tool's handler must never run")


@tool
def explode(n: int) -> str:
    """Always fail."""
    raise RuntimeError("kaboom")


TOOLS: tuple[Tool[BaseModel], ...] = (search, fetch, poll, shell_exec, explode)


def propose(name: str, args: Mapping[str, Any], call_id: str) -> ProposedToolCall:
    """A proposed call with JSON-encoded arguments."""
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(dict(args)))


def completed(
    tool_name: str,
    args: Mapping[str, Any] | None = None,
    *,
    call_id: str | None = None,
    is_error: bool = False,
) -> ToolCall:
    """A completed call record, as the executor would store it."""
    return ToolCall.completed(
        id=call_id or ToolCall.new_id(),
        tool=tool_name,
        args=dict(args or {}),
        results="error" if is_error else "ok",
        is_error=is_error,
    )


class PlanModel:
    """A chat model that plays a plan of calls, skipping any the request does not offer.

    Each iteration it proposes the next planned call whose tool is among the offered tools
    (calls to tools no longer offered are dropped, as a real model would); when the plan is
    used up or nothing planned is offered, it answers with text. ``stubborn=True`` proposes
    planned calls even when their tool is not offered (a model that ignores the tool list).
    """

    def __init__(
        self,
        plan: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        forever: bool = False,
        stubborn: bool = False,
    ) -> None:
        self.plan = list(plan)
        self.forever = forever
        self.stubborn = stubborn
        self.offered: list[list[str]] = []
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        offered = [t["name"] for t in request.tools]
        self.offered.append(offered)
        while self.forever or self._next < len(self.plan):
            name, args = self.plan[self._next % len(self.plan)]
            self._next += 1
            if self.stubborn or name in offered:
                return ModelResponse(tool_calls=[propose(name, args, f"call_{self._next}")])
            if self.forever and not any(n in offered for n, _ in self.plan):
                break
        return ModelResponse(text="finished")


@pytest.fixture
def call() -> Callable[..., ToolCall]:
    """Return ``call(tool, args=None, *, call_id=None, is_error=False) -> ToolCall``."""
    return completed


@pytest.fixture
def plan_model() -> Callable[..., Any]:
    """Return the `PlanModel` class: ``plan_model(plan, forever=False, stubborn=False)``."""
    return PlanModel


@pytest.fixture
def repeating() -> Callable[..., Any]:
    """Return ``repeating(name="search", args=None)``: a model that calls the same thing
    with the same arguments for as long as the tool is offered."""

    def make(name: str = "search", args: Mapping[str, Any] | None = None) -> PlanModel:
        return PlanModel([(name, args or {"q": "same"})], forever=True)

    return make


@pytest.fixture
def make_runner() -> Callable[..., TurnRunner]:
    """Return ``make(model, middleware, **options) -> TurnRunner`` over the shared tools."""

    def make(model: Any, middleware: Sequence[object] = (), **options: Any) -> TurnRunner:
        options.setdefault("tools", TOOLS)
        return TurnRunner(executor=ToolLoopExecutor(model), middleware=middleware, **options)

    return make


@pytest.fixture
def decisions_log() -> Callable[[TurnRunner], list[Log]]:
    """Return ``attach(runner) -> list`` collecting the ``policy.decision`` Log events."""

    def attach(runner: TurnRunner) -> list[Log]:
        seen: list[Log] = []

        def keep(event: Log) -> None:
            if event.kind == "policy.decision":
                seen.append(event)

        runner.on(Log, keep)
        return seen

    return attach


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def sinks(request: pytest.FixtureRequest) -> SinkBackend:
    """Each audit sink: JSON Lines, SQLite, PostgreSQL (a chain per log folder)."""
    if request.param == "jsonl":
        return JsonlSinks()
    if request.param == "sqlite":
        return SqliteSinks()
    return PostgresSinks(request.getfixturevalue("pg_conninfo"))
