"""Replaying a recorded conversation through a middleware stack, offline: `replay`.

Every recorded tool name becomes a permissive `Tool` (any JSON object is valid) whose handler
returns the recorded result of that call; a name loopware cannot register (``Final Answer``)
is replayed under a safe alias. Given the agent's real ``tools``, the replay offers those
instead (their names and argument schemas, handlers that return the recorded results): a
recorded call to a name none of them has is an unknown tool, and arguments are validated as
they were live. Every recorded turn runs through one `TurnRunner` with a `ToolLoopExecutor`
over a model that proposes exactly the recorded calls, each under an id unique in the
transcript. What the stack decided is each call's stored record (`ToolCallStored`: its
verdict, ``ran`` and decisions) and the `ToolDecided` events (tools hidden or withdrawn).

Turns share one conversation (so ``tool_call_count`` sees earlier turns, as a deployed agent with
a conversation store would) unless ``separate_turns`` is set. Time and memory grow with the
number of calls, not its square: the scripted model keeps no request, and every lookup is a dict.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from pipeline import DispatchContext, Stash, Tool, ToolLoopExecutor, TurnRunner
from pipeline.errors import InvalidToolError, ToolDownstreamError
from pipeline.events import (
    IterationStart,
    ToolCallStored,
    ToolDecided,
    ToolExecutionStart,
    TurnStart,
)
from pipeline.models import ModelRequest, ModelResponse
from pipeline.stores import MemoryStore

from ._names import tool_alias
from ._outcome import ReplayReport, TurnOutcome
from ._script import TurnScript
from ._transcript import read_transcript
from ._types import RecordedCall, RecordedTurn, Transcript

__all__ = ["NO_RESULT", "policy_labels", "replay", "replay_async"]

NO_RESULT: Final = "(no result was recorded for this call)"
"""What a replayed handler returns when the transcript has no result for the call."""

_LABELS: Final = {
    "RepetitionDetector": "repeat detected",
    "ToolCallLimit": "limit reached",
    "ToolPolicy": "tool policy",
    "IterationBudget": "iteration budget",
    "TokenBudget": "token budget",
    "ApprovalGate": "approval",
}


class _AnyArgs(BaseModel):
    """Any JSON object: replay uses the recorded arguments, not the real schemas."""

    model_config = ConfigDict(extra="allow")


def policy_labels(middleware: Sequence[object]) -> dict[str, str]:
    """Map each built-in policy's name (its namespace) to what its decisions mean.

    ``{"loopware.limit": "limit reached", ...}`` for the `ToolCallLimit`, `RepetitionDetector`,
    `ToolPolicy`, `ApprovalGate`, `IterationBudget` and `TokenBudget` in ``middleware``.
    """
    labels: dict[str, str] = {}
    for item in middleware:
        label = _LABELS.get(type(item).__name__)
        namespace = getattr(item, "namespace", None)
        if label is not None and isinstance(namespace, str):
            labels[namespace] = label
    return labels


class _ScriptedSteps:
    """The replay's `ChatModel`: asks the current turn's script for the next step."""

    __slots__ = ("script",)

    def __init__(self) -> None:
        self.script: TurnScript | None = None

    def __repr__(self) -> str:
        return f"_ScriptedSteps({self.script!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        script = self.script
        if script is None:  # pragma: no cover - the runner only runs inside replay_turn
            raise RuntimeError("the replay model was called outside a replayed turn")
        return script.respond(request)


class _Replayer:
    """One runner for the whole transcript; the current turn's script is swapped per turn."""

    __slots__ = ("aliases", "model", "runner", "running")

    def __init__(
        self,
        transcript: Transcript,
        middleware: Sequence[object],
        real: Sequence[Tool[Any]] | None = None,
    ) -> None:
        self.model = _ScriptedSteps()
        self.running: RecordedCall | None = None
        """The recorded call whose handler is about to run (calls run one at a time)."""
        self.aliases: dict[str, str] = {}
        tools: list[Tool[Any]] = []
        if real is not None:
            tools = [self._standing_in(t) for t in real]
        else:
            names = list(dict.fromkeys(c.tool for turn in transcript.turns for c in turn.calls))
            taken = set(names)
            for name in names:
                try:
                    tools.append(self._tool(name, name))
                except InvalidToolError:
                    alias = tool_alias(name, taken)
                    taken.add(alias)
                    self.aliases[name] = alias
                    tools.append(self._tool(alias, name))
        self.runner = TurnRunner(
            executor=ToolLoopExecutor(self.model),
            tools=tools,
            middleware=list(middleware),
            store=MemoryStore(),
            system_prompt=transcript.system_prompt,
            max_iterations=None,
        )
        self.runner.on(TurnStart, self._on_turn_start)
        self.runner.on(IterationStart, self._on_iteration)
        self.runner.on(ToolCallStored, self._on_stored)
        self.runner.on(ToolExecutionStart, self._on_execution)
        self.runner.on(ToolDecided, self._on_tool_decided)

    def __repr__(self) -> str:
        return f"_Replayer({self.runner!r}, aliases={self.aliases!r})"

    def _tool(self, name: str, recorded: str) -> Tool[Any]:
        what = f"The recorded tool {recorded!r} (replayed"
        return Tool(
            name=name,
            description=what + (")." if name == recorded else f" as {name})."),
            input_schema=_AnyArgs,
            handler=self._handler_for(name),
        )

    def _standing_in(self, real: Tool[Any]) -> Tool[Any]:
        """``real`` (its name, schema, artifact class) with the replay's handler."""
        handler = self._handler_for(real.name)
        return real.with_handler(lambda _handler: handler)

    def _handler_for(self, name: str) -> Callable[[Any, DispatchContext, Stash], str]:
        def replayed(args: Any, ctx: DispatchContext, meta: Stash) -> str:
            call, self.running = self.running, None
            text = NO_RESULT if call is None or call.result is None else call.result
            if call is not None and call.result_is_error:
                raise ToolDownstreamError(text, tool_name=name, call_id=call.replay_id)
            return text

        return replayed

    def _on_turn_start(self, event: TurnStart) -> None:
        script = self.model.script
        if script is not None and script.turn_id is None:
            script.turn_id = event.turn_id

    def _current(self, turn_id: str) -> TurnScript | None:
        script = self.model.script
        return script if script is not None and script.turn_id == turn_id else None

    def _on_iteration(self, event: IterationStart) -> None:
        script = self._current(event.turn_id)
        if script is not None:
            script.iteration = event.iteration

    def _on_stored(self, event: ToolCallStored) -> None:
        script = self._current(event.turn_id)
        if script is not None:
            script.on_stored(event.call)

    def _on_execution(self, event: ToolExecutionStart) -> None:
        script = self._current(event.turn_id)
        self.running = None if script is None else script.recorded(event.call_id)

    def _on_tool_decided(self, event: ToolDecided) -> None:
        script = self._current(event.turn_id)
        if script is not None:
            script.on_tool_decided(event.decision)

    async def replay_turn(self, turn: RecordedTurn, conversation_id: str | None) -> TurnOutcome:
        script = self.model.script = TurnScript(turn, self.aliases)
        try:
            result = await self.runner.run(turn.input, conversation_id=conversation_id)
        finally:
            self.model.script = None
        error = result.errors[0] if result.status == "failed" and result.errors else None
        return TurnOutcome(
            turn=turn,
            status=result.status,
            error_code=getattr(error, "code", None) if error is not None else None,
            error_message=str(error) if error is not None else None,
            iterations=result.iterations,
            decisions=tuple(script.loose),
            calls=script.outcomes(),
            after_call=script.last_reached,
        )


async def replay_async(
    transcript: Transcript | str | os.PathLike[str] | Sequence[object] | Mapping[str, object],
    middleware: Sequence[object] = (),
    *,
    separate_turns: bool = False,
    sources: Sequence[str] = (),
    tools: Sequence[Tool[Any]] | None = None,
) -> ReplayReport:
    """Replay every readable turn of ``transcript`` through ``middleware`` (see `replay`)."""
    if not isinstance(transcript, Transcript):
        transcript = read_transcript(transcript)
    items = list(middleware)
    replayer = _Replayer(transcript, items, None if tools is None else list(tools))
    conversation_id = None if separate_turns else "replay"
    turns = [await replayer.replay_turn(turn, conversation_id) for turn in transcript.turns]
    return ReplayReport(
        transcript=transcript,
        middleware=tuple(sources) if sources else tuple(repr(m) for m in items),
        pipelines=replayer.runner.describe_pipelines(),
        turns=tuple(turns),
        labels=policy_labels(items),
    )


def replay(
    transcript: Transcript | str | os.PathLike[str] | Sequence[object] | Mapping[str, object],
    middleware: Sequence[object] = (),
    *,
    separate_turns: bool = False,
    sources: Sequence[str] = (),
    tools: Sequence[Tool[Any]] | None = None,
) -> ReplayReport:
    """Replay a recorded conversation through a middleware stack, offline.

    Reports what the stack would have done at each recorded tool call.

    Args:
        transcript: A `Transcript` from `read_transcript`, or anything `read_transcript` takes
            (a path, a list of messages, an object holding them); its issues are carried into
            the report.
        middleware: Middleware sets and instances, as ``TurnRunner(middleware=...)`` takes.
        separate_turns: Run each turn on its own instead of as one conversation.
        sources: How the middleware was named (for the report; default: each item's repr).
        tools: The agent's real tools, to replay against their names and argument schemas
            (their handlers never run: each returns the recorded result); None (the default)
            offers every recorded name with any JSON object as its arguments.

    Returns:
        A `ReplayReport`: per recorded call, the record the replay stored and its verdict
        (``allowed``, ``denied``, ``rejected``, ``invalid``..., as ``loopware run`` and the
        audit log name it; ``not reached`` when the turn ended first), with the decisions
        behind it and the tools its outcome hid.

    Raises:
        InvalidRunnerConfigError: the middleware cannot be composed into a runner.
        RuntimeError: called from a running event loop (await `replay_async` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "replay() cannot be called from a running event loop: await replay_async() there"
        )
    return asyncio.run(
        replay_async(
            transcript, middleware, separate_turns=separate_turns, sources=sources, tools=tools
        )
    )
