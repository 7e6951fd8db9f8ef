"""One instance of each built-in serves many concurrent turns with independent state."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from middleware import (
    IterationBudget,
    RepetitionDetector,
    ToolCallCounter,
    ToolCallLimit,
    ToolPolicy,
)
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall


@tool
async def search(q: str) -> str:
    """Search (yields to the loop so turns interleave)."""
    await asyncio.sleep(0)
    return q


@tool
def shell(cmd: str) -> str:
    """Never offered."""
    raise AssertionError("denied")


class PerTurnModel:
    """Turn k (read from the input) makes k % 4 + 1 distinct search calls, then answers.

    Turns with k % 5 == 0 instead repeat ``search(q="same")`` while search is offered: the same
    checksum in twenty turns at once, each of which must see only its own repeats.
    """

    def __init__(self) -> None:
        self.made: dict[str, int] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        key = request.messages[0].content
        wanted = int(key) % 4 + 1
        done = self.made.get(key, 0)
        await asyncio.sleep(0)
        offered = any(t["name"] == "search" for t in request.tools)
        if offered and (done < wanted or int(key) % 5 == 0):
            self.made[key] = done + 1
            args = json.dumps({"q": "same" if int(key) % 5 == 0 else f"{key}-{done}"})
            call = ProposedToolCall(id=f"{key}-{done}", name="search", arguments=args)
            return ModelResponse(tool_calls=[call])
        return ModelResponse(text=f"answer {key}")


async def test_one_instance_of_each_builtin_keeps_100_concurrent_turns_apart() -> None:
    """Each turn's stash holds only its own counts; limits and hides never leak across turns."""
    builtins: list[Any] = [
        ToolCallCounter(),
        RepetitionDetector(threshold=2, window=4, on_repeat="hide"),
        ToolCallLimit({"search": 3}),
        IterationBudget(10),
        ToolPolicy(deny=["shell"]),
    ]
    runner = TurnRunner(
        executor=ToolLoopExecutor(PerTurnModel()), tools=[search, shell], middleware=builtins
    )
    results = await asyncio.gather(*(runner.run(str(k)) for k in range(100)))
    for k, result in enumerate(results):
        repeats = k % 5 == 0
        made = 2 if repeats else min(k % 4 + 1, 3)  # hidden at the 2nd repeat, or the limit
        assert result.status == "completed", (k, result.errors)
        assert len(result.tool_calls) == made
        state = result.stash["loopware"]
        assert state["counter"]["total"] == {"completed": made, "failed": 0}
        assert state["limit"]["used"] == {"search": made}
        decided = [(d.tool, d.policy, d.action) for d in result.tool_decisions]
        assert decided == [
            ("shell", "loopware.policy", "withdrawn"),
            *([("search", "loopware.limit", "hidden")] if made == 3 else []),
            *([("search", "loopware.repetition", "hidden")] if repeats else []),
        ]
        assert all(c.ran and c.verdict == "allowed" for c in result.tool_calls)
