"""ToolLoopExecutor shows small text results whole and large ones as artifact handles."""

from __future__ import annotations

import pytest

from pipeline import (
    ModelResponse,
    ProposedToolCall,
    SpooledArtifact,
    ToolLoopExecutor,
    TurnRunner,
    tool,
)
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
    assert isinstance(call.results, SpooledArtifact)
    assert call.results.as_string() == body
    assert call.inline is inline


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
