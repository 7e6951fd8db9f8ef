"""ToolLoopExecutor shows small text results whole and large ones as artifact handles."""

from __future__ import annotations

import pytest

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import SpooledArtifact
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemorySpoolStore, SpoolReader
from pipeline.testing import ScriptedModel


@pytest.mark.parametrize(
    ("body", "limit", "inline"),
    [
        ("x" * 10, 10, True),
        ("x" * 11, 10, False),
        ("é" * 5, 10, True),  # 10 UTF-8 bytes
        ("é" * 6, 10, False),  # 12 UTF-8 bytes though only 6 characters
        ("", 0, True),
    ],
    ids=["at-limit", "one-over", "multibyte-at-limit", "multibyte-over", "empty"],
)
async def test_inline_limit_counts_utf8_bytes(body: str, limit: int, inline: bool) -> None:
    """A result is inline exactly when its UTF-8 size is within `inline_limit`."""

    @tool
    def produce() -> str:
        """Produce the body."""
        return body

    steps = [ModelResponse(tool_calls=[ProposedToolCall(id="c1", name="produce", arguments="{}")])]
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(steps), inline_limit=limit), tools=[produce]
    )
    result = await runner.run("go")
    call = result.tool_calls[0]
    assert call.inline is inline
    if inline:  # shown whole: kept as the plain string, never spooled
        assert call.results == body
    else:
        assert isinstance(call.results, SpooledArtifact)
        assert call.results.as_string() == body


async def test_large_result_forges_artifact_tools_for_the_next_iteration() -> None:
    """A result over the limit is a handle, and the next request offers artifact query tools."""

    @tool
    def logs() -> str:
        """Return a long log."""
        return "\n".join(f"line {i}" for i in range(1000))

    steps = [
        ModelResponse(tool_calls=[ProposedToolCall(id="big", name="logs", arguments="{}")]),
        ModelResponse(
            tool_calls=[
                ProposedToolCall(
                    id="t", name="artifact_tail", arguments='{"call_id": "big", "n": 2}'
                )
            ]
        ),
    ]
    model = ScriptedModel(steps)
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[logs])
    result = await runner.run("go")
    assert result.status == "completed"
    offered = [t["name"] for t in model.requests[1].tools]
    assert "artifact_tail" in offered
    assert "artifact_grep" in offered
    tail_call = result.tool_calls[1]
    assert tail_call.from_artifact_tool
    assert not tail_call.is_error
    assert tail_call.results == "line 998\nline 999"
    assert [t["name"] for t in model.requests[2].tools] == [
        t["name"] for t in model.requests[1].tools
    ]


class CountingSpool:
    """A memory spool that counts the bodies written to it."""

    def __init__(self) -> None:
        self.inner = MemorySpoolStore()
        self.writes = 0

    def write(self, id: str, data: str | bytes) -> SpoolReader:
        self.writes += 1
        return self.inner.write(id, data)

    def read(self, id: str) -> SpoolReader | None:
        return self.inner.read(id)

    def delete(self, id: str) -> bool:
        return self.inner.delete(id)


async def test_results_within_inline_limit_are_never_spooled() -> None:
    """Small text results stay plain strings; only a result over the limit reaches the spool."""

    @tool
    def produce(size: int) -> str:
        """Produce ``size`` characters."""
        return "x" * size

    steps = [
        ModelResponse(
            tool_calls=[ProposedToolCall(id="a", name="produce", arguments='{"size":3}')]
        ),
        ModelResponse(
            tool_calls=[ProposedToolCall(id="b", name="produce", arguments='{"size":99}')]
        ),
    ]
    spool = CountingSpool()
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(steps), inline_limit=10),
        tools=[produce],
        spool=spool,
    )
    result = await runner.run("go")
    small, large = result.tool_calls
    assert (small.results, small.inline) == ("xxx", True)
    assert isinstance(large.results, SpooledArtifact)
    assert not large.inline
    assert spool.writes == 1
