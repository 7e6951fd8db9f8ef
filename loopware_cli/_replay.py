"""Replaying a recorded conversation through a middleware stack, offline.

Every recorded tool name becomes a permissive `Tool` (any JSON object is valid) whose handler
returns the recorded result of that call; every recorded turn runs through one `TurnRunner`
with a `ToolLoopExecutor` over a `ScriptedModel` that proposes exactly the recorded calls. What
the stack decided is read back from ``policy.decision`` `Log` events and from the
``<namespace>.decisions`` lists in the final stash, and reported per recorded call.

Turns share one conversation (so ``tool_call_count`` sees earlier turns, as a deployed agent with
a conversation store would) unless ``separate_turns`` is set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline import (
    DispatchContext,
    InvalidToolError,
    IterationStart,
    Log,
    MemoryStore,
    ModelResponse,
    ProposedToolCall,
    Stash,
    Tool,
    ToolCall,
    ToolCallStored,
    ToolDownstreamError,
    ToolExecutionStart,
    ToolLoopExecutor,
    TurnRunner,
    TurnStart,
)
from pipeline.testing import ScriptedModel

from ._replay_outcome import NOT_REACHED, SEVERITY, CallOutcome, Decision, ReplayReport, TurnOutcome
from ._replay_types import RecordedCall, RecordedTurn, Transcript

__all__ = ["policy_labels", "replay_transcript"]

NO_RESULT = "(no result was recorded for this call)"
"""What a replayed handler returns when the transcript has no result for the call."""

_LABELS = {
    "RepetitionDetector": "repeat detected",
    "ToolCallLimit": "limit reached",
    "ToolPolicy": "tool policy",
    "IterationBudget": "iteration budget",
    "ApprovalGate": "approval",
}


class _AnyArgs(BaseModel):
    """Any JSON object: replay uses the recorded arguments, not the real schemas."""

    model_config = ConfigDict(extra="allow")


def policy_labels(middleware: Sequence[object]) -> dict[str, str]:
    """Map each built-in policy's stash namespace to what its decisions mean."""
    labels: dict[str, str] = {}
    for item in middleware:
        label = _LABELS.get(type(item).__name__)
        namespace = getattr(item, "namespace", None)
        if label is not None and isinstance(namespace, str):
            labels[namespace] = label
    return labels


@dataclass(slots=True)
class _Reached:
    """A recorded call that the replay stored."""

    stored: ToolCall
    iteration: int
    decisions: list[Decision]
    ran: bool = False


class _TurnScript:
    """One recorded turn being replayed: the scripted model and what the events told."""

    __slots__ = (
        "early",
        "executor",
        "loose",
        "model",
        "pending",
        "ran_ids",
        "reached",
        "seen",
        "step_of",
        "stored_ids",
        "turn",
        "turn_id",
    )

    def __init__(self, turn: RecordedTurn) -> None:
        self.turn = turn
        steps = [
            ModelResponse(
                text=step.text,
                tool_calls=tuple(ProposedToolCall(c.id, c.tool, c.arguments) for c in step.calls),
            )
            for step in turn.steps
        ]
        steps.append(ModelResponse(text=turn.answer))
        self.model = ScriptedModel(steps)
        self.executor = ToolLoopExecutor(self.model)
        self.turn_id: str | None = None
        self.step_of = {c.index: k for k, step in enumerate(turn.steps) for c in step.calls}
        self.pending: list[RecordedCall] = list(turn.calls)
        self.reached: dict[int, _Reached] = {}
        self.stored_ids: dict[str, int] = {}
        self.loose: list[Decision] = []
        self.early: dict[str, list[Decision]] = {}
        """Decisions taken about a call before it was stored (in the ``tool_call`` stage)."""
        self.ran_ids: set[str] = set()
        """Ids of the calls whose handler ran in the replay."""
        self.seen: Counter[tuple[object, ...]] = Counter()

    def __repr__(self) -> str:
        return f"_TurnScript(turn={self.turn.index}, reached={len(self.reached)})"

    def recorded_for_handler(self, tool: str, position: int) -> RecordedCall | None:
        """The recorded call a handler is running for: this step's call at ``position``."""
        step = len(self.model.requests) - 1
        if not 0 <= step < len(self.turn.steps):
            return None
        calls = self.turn.steps[step].calls
        if position < len(calls) and calls[position].tool == tool:
            return calls[position]
        return next((c for c in calls if c.tool == tool and c.index not in self.reached), None)

    def on_stored(self, call: ToolCall, iteration: int) -> None:
        index = self.stored_ids.get(call.id)
        if index is not None:  # mutated: keep the mapping, refresh the record
            self.reached[index].stored = call
            return
        match = next((c for c in self.pending if c.id == call.id), None)
        if match is None:
            match = next((c for c in self.pending if c.tool == call.tool), None)
        if match is None:
            return  # stored by middleware, not by the recorded script
        self.pending.remove(match)
        self.stored_ids[call.id] = match.index
        self.reached[match.index] = _Reached(
            call, iteration, self.early.pop(call.id, []), call.id in self.ran_ids
        )

    def on_decision(self, payload: Mapping[str, Any]) -> None:
        decision = Decision(
            policy=str(payload.get("policy") or "?"),
            tool=_opt_str(payload.get("tool")),
            action=str(payload.get("action") or "?"),
            reason=str(payload.get("reason") or ""),
            iteration=_opt_int(payload.get("iteration")),
        )
        self.seen[decision.key()] += 1
        self._attach(decision, _opt_str(payload.get("call_id")), _opt_str(payload.get("checksum")))

    def _attach(self, decision: Decision, call_id: str | None, checksum: str | None) -> None:
        index = self.stored_ids.get(call_id) if call_id is not None else None
        if index is None and call_id is not None and call_id in self.proposed_ids():
            # decided in the tool_call stage, before the call was stored: keep it for the call
            self.early.setdefault(call_id, []).append(decision)
            return
        if index is None and checksum is not None:
            for i, reached in reversed(self.reached.items()):
                if reached.stored.checksum == checksum and (
                    decision.iteration is None or reached.iteration == decision.iteration
                ):
                    index = i
                    break
        if index is None:
            self.loose.append(decision)
        else:
            self.reached[index].decisions.append(decision)

    def proposed_ids(self) -> set[str]:
        """Ids of the recorded calls not stored yet."""
        return {c.id for c in self.pending}

    def add_stash_decisions(self, stash: Mapping[str, Any]) -> None:
        """Add decisions recorded only in the stash (middleware that logs none)."""
        for namespace, entry in _stash_decisions(stash, ""):
            decision = Decision(
                policy=namespace,
                tool=_opt_str(entry.get("tool")),
                action=str(entry.get("action") or "?"),
                reason=str(entry.get("reason") or ""),
                iteration=_opt_int(entry.get("iteration")),
            )
            key = decision.key()
            if self.seen[key] > 0:  # already reported by its policy.decision log
                self.seen[key] -= 1
            else:
                self._attach(decision, None, _opt_str(entry.get("checksum")))

    def outcomes(self, labels: Mapping[str, str]) -> tuple[CallOutcome, ...]:
        requests = self.model.requests
        result: list[CallOutcome] = []
        for call in self.turn.calls:
            reached = self.reached.get(call.index)
            if reached is None:
                result.append(CallOutcome(call, None, None, (), NOT_REACHED))
                continue
            step = self.step_of[call.index]
            offered = (
                any(t["name"] == call.tool for t in requests[step].tools)
                if step < len(requests)
                else None
            )
            decisions = tuple(d.labelled(labels) for d in reached.decisions)
            verdict = max((d.action for d in decisions), key=_severity, default="allowed")
            result.append(
                CallOutcome(call, reached.stored, offered, decisions, verdict, reached.ran)
            )
        return tuple(result)


def _severity(action: str) -> int:
    return SEVERITY.get(action, 0)


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _stash_decisions(node: object, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        here = f"{path}.{key}" if path else str(key)
        if key == "decisions" and isinstance(value, list) and path:
            for entry in value:
                if isinstance(entry, Mapping) and "action" in entry:
                    yield path, entry
        else:
            yield from _stash_decisions(value, here)


class _Replayer:
    """One runner for the whole transcript; the current turn's script is swapped per turn."""

    __slots__ = ("_current", "_iteration", "runner")

    def __init__(self, transcript: Transcript, middleware: Sequence[object]) -> None:
        self._current: _TurnScript | None = None
        self._iteration = 0
        tools: list[Tool[Any]] = []
        for name in dict.fromkeys(c.tool for c in transcript.calls):
            try:
                tools.append(
                    Tool(
                        name=name,
                        description=f"The recorded tool {name!r} (replayed).",
                        input_schema=_AnyArgs,
                        handler=self._handler_for(name),
                    )
                )
            except InvalidToolError:
                continue  # not a valid tool name: the executor reports calls to it as unknown
        self.runner = TurnRunner(
            executor=self._execute,
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
        self.runner.on(Log, self._on_log)

    def __repr__(self) -> str:
        return f"_Replayer({self.runner!r}, current={self._current!r})"

    async def _execute(self, ctx: DispatchContext) -> None:
        script = self._current
        if script is None:  # pragma: no cover - the runner only runs inside replay_turn
            raise RuntimeError("the replay executor ran outside a replayed turn")
        await script.executor(ctx)

    def _handler_for(self, name: str) -> Callable[[_AnyArgs, DispatchContext, Stash], str]:
        def replayed(args: _AnyArgs, ctx: DispatchContext, meta: Stash) -> str:
            script = self._current
            call = (
                None
                if script is None
                else script.recorded_for_handler(name, len(ctx.new_tool_calls))
            )
            text = NO_RESULT if call is None or call.result is None else call.result
            if call is not None and call.result_is_error:
                raise ToolDownstreamError(text, tool_name=name, call_id=call.id)
            return text

        return replayed

    def _on_turn_start(self, event: TurnStart) -> None:
        if self._current is not None:
            self._current.turn_id = event.turn_id
        self._iteration = 0

    def _on_iteration(self, event: IterationStart) -> None:
        self._iteration = event.iteration

    def _on_stored(self, event: ToolCallStored) -> None:
        script = self._current
        if script is not None and event.turn_id == script.turn_id:
            script.on_stored(event.call, self._iteration)

    def _on_execution(self, event: ToolExecutionStart) -> None:
        script = self._current
        if script is not None and event.turn_id == script.turn_id:
            script.ran_ids.add(event.call_id)

    def _on_log(self, event: Log) -> None:
        script = self._current
        if (
            event.kind == "policy.decision"
            and script is not None
            and event.turn_id == script.turn_id
        ):
            script.on_decision(event.payload)

    async def replay_turn(
        self, turn: RecordedTurn, conversation_id: str | None, labels: Mapping[str, str]
    ) -> TurnOutcome:
        script = self._current = _TurnScript(turn)
        result = await self.runner.run(turn.input, conversation_id=conversation_id)
        self._current = None
        script.add_stash_decisions(result.stash)
        error = result.errors[0] if result.status == "failed" and result.errors else None
        return TurnOutcome(
            turn=turn,
            status=result.status,
            error_code=getattr(error, "code", None) if error is not None else None,
            error_message=str(error) if error is not None else None,
            iterations=result.iterations,
            decisions=tuple(d.labelled(labels) for d in script.loose),
            calls=script.outcomes(labels),
        )


async def replay_transcript(
    transcript: Transcript,
    middleware: Sequence[object],
    *,
    separate_turns: bool = False,
    sources: Sequence[str] = (),
) -> ReplayReport:
    """Replay every readable turn of ``transcript`` through ``middleware``.

    Args:
        transcript: What `read_transcript` returned (its issues are carried into the report).
        middleware: Middleware sets and instances, as ``TurnRunner(middleware=...)`` takes.
        separate_turns: Run each turn on its own instead of as one conversation.
        sources: How the middleware was named on the command line (for the report).

    Raises:
        InvalidRunnerConfigError: the middleware cannot be composed into a runner.
    """
    replayer = _Replayer(transcript, middleware)
    labels = policy_labels(middleware)
    conversation_id = None if separate_turns else "replay"
    turns = [await replayer.replay_turn(turn, conversation_id, labels) for turn in transcript.turns]
    return ReplayReport(
        transcript=transcript,
        middleware=tuple(sources),
        pipelines=replayer.runner.describe_pipelines(),
        turns=tuple(turns),
    )
