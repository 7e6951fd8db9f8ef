"""The test doubles of `pipeline.testing`: a scripted model, a dispatch context, a stall meter.

``ScriptedModel`` plays back a fixed list of `ModelResponse` values, so a turn, a middleware
stack or an example runs deterministically with no network. ``make_dispatch_context`` builds a
`DispatchContext` for unit-testing a single middleware without a runner. ``StallMeter``
measures the longest the event loop could not run anything (a tool that blocks it, a parse
that holds the interpreter lock), the cost every other turn on the loop pays.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from ._bus import EventBus
from ._context import TurnContext
from ._dispatch import DispatchContext
from ._events import Event
from ._onion import Onion
from ._registry import ToolRegistry
from ._stash import Stash
from ._tool import Tool
from ._turn_state import TurnState
from .calls._toolcall import ToolCall
from .models._message import Message
from .models._seam import ModelRequest, ModelResponse
from .stores._conversation import ConversationHistory
from .stores._spool import MemorySpoolStore, SpoolStore
from .stores._store import MemoryStore, TurnStore

__all__ = ["ScriptedModel", "StallMeter", "make_dispatch_context"]


class ScriptedModel:
    """A deterministic `ChatModel`: step k answers the k-th `complete` call.

    Past the end of the script it answers ``ModelResponse(text="done")``, or starts the script
    again when ``cycle=True`` (handy for benchmarks that run many turns on one runner).

    Args:
        steps: The responses to play back, in order.
        cycle: Restart the script after its last step instead of answering ``"done"``.
        record: Keep every request in `requests` (turn off for long benchmarks).
    """

    __slots__ = ("_cycle", "_index", "_record", "_steps", "requests")

    def __init__(
        self, steps: Sequence[ModelResponse], *, cycle: bool = False, record: bool = True
    ) -> None:
        """Load the script."""
        steps = tuple(steps)
        for step in steps:
            if not isinstance(step, ModelResponse):
                raise TypeError(f"ScriptedModel steps must be ModelResponse values, got {step!r}")
        if cycle and not steps:
            raise ValueError("a cycling ScriptedModel needs at least one step")
        self._steps = steps
        self._cycle = cycle
        self._record = record
        self._index = 0
        self.requests: list[ModelRequest] = []
        """Every request received, in order (when ``record`` is on)."""

    def __repr__(self) -> str:
        """Show the script position."""
        return f"ScriptedModel(steps={len(self._steps)}, answered={self._index})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the next scripted step."""
        if self._record:
            self.requests.append(request)
        index = self._index
        self._index = index + 1
        steps = self._steps
        if index < len(steps):
            return steps[index]
        if self._cycle:
            return steps[index % len(steps)]
        return ModelResponse(text="done")

    def reset(self) -> None:
        """Start the script again from its first step and forget recorded requests."""
        self._index = 0
        self.requests.clear()


def make_dispatch_context(
    *,
    tools: Iterable[Tool[Any]] | ToolRegistry = (),
    stash: Mapping[str, Any] | Stash | None = None,
    tool_calls: Sequence[ToolCall] = (),
    new_tool_calls: Sequence[ToolCall] | None = None,
    iteration: int = 0,
    messages: Sequence[Message] = (),
    history_tool_calls: Sequence[ToolCall] = (),
    turn_id: str = "turn_test",
    system_prompt: str | None = None,
    input: str = "",
    store: TurnStore | None = None,
    spool: SpoolStore | None = None,
    events: list[Event] | None = None,
) -> DispatchContext:
    """Build a `DispatchContext` for unit-testing middleware, with no runner.

    Args:
        tools: The turn's tools (a registry is copied).
        stash: The stash, or a mapping to seed one.
        tool_calls: Calls already stored this turn (they count for ``tool_call_count``).
        new_tool_calls: The calls of the current iteration (default: ``tool_calls``).
        iteration: The current iteration number.
        messages: The conversation so far.
        history_tool_calls: Calls of earlier turns of the conversation.
        turn_id: The turn id.
        system_prompt: The system prompt.
        input: The user input of the turn.
        store: The store (default: a fresh `MemoryStore`).
        spool: The spool store (default: a fresh `MemorySpoolStore`).
        events: A list that receives every event the context emits.

    Returns:
        A dispatch context whose turn is ``ctx.turn``.
    """
    bus = EventBus()
    if events is not None:
        bus.on_any(events.append)
    state = TurnState(
        turn_id=turn_id,
        input=input,
        tools=ToolRegistry(tools),
        stash=stash if isinstance(stash, Stash) else Stash(stash),
        store=store if store is not None else MemoryStore(),
        spool=spool if spool is not None else MemorySpoolStore(),
        bus=bus,
        tool_call_onion=Onion((), ()),
        system_prompt=system_prompt,
    )
    state.load_history(ConversationHistory.of_records(tuple(messages), tuple(history_tool_calls)))
    state.seed_calls(tool_calls, new_calls=new_tool_calls)
    ctx = DispatchContext(state, TurnContext(state), "dispatch_test")
    ctx.iteration = iteration
    return ctx


class StallMeter:
    """Measure the longest stretch the running event loop was kept from running anything.

    A ticker task sleeps ``tick`` seconds again and again; how much later than asked it wakes is
    how long the loop was blocked. Use it around the code under test::

        async with StallMeter() as meter:
            await runner.run("go")
        assert meter.worst < 0.1

    Args:
        tick: The ticker's sleep, in seconds (the resolution of the measurement).
    """

    __slots__ = ("_task", "tick", "worst")

    def __init__(self, tick: float = 0.001) -> None:
        """Configure the meter (it starts when entered)."""
        self.tick = tick
        self.worst = 0.0
        """The longest stall seen, in seconds."""
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        """Show the worst stall so far."""
        return f"StallMeter(worst={self.worst * 1000:.1f} ms)"

    async def __aenter__(self) -> StallMeter:
        """Start the ticker."""
        self._task = asyncio.ensure_future(self._ticker())
        await asyncio.sleep(0)  # let it take its first time
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the ticker."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _ticker(self) -> None:
        tick, clock = self.tick, time.perf_counter
        last = clock()
        while True:
            await asyncio.sleep(tick)
            now = clock()
            self.worst = max(self.worst, now - last - tick)
            last = now


for _public in (ScriptedModel, StallMeter, make_dispatch_context):
    _public.__module__ = "pipeline.testing"
