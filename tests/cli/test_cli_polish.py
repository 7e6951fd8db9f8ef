"""What a reader of the CLI's output relies on: lines that do not run together, arguments shown
whole, exit statuses told once, and counts that add up."""

from __future__ import annotations

import io

from loopware_cli._run import RunOptions, run_model_turn
from pipeline import tool
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


TOOLS = [lookup]


class Narrating:
    """Streams a narration with its tool call, then streams the answer."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        emit = request.on_text_delta
        if not request.tool_calls:
            if emit is not None:
                emit("Let me look ")
                emit("that up.")
            call = ProposedToolCall(id="c1", name="lookup", arguments='{"order": "A-1"}')
            return ModelResponse(text="Let me look that up.", tool_calls=[call])
        if emit is not None:
            emit("It has shipped.")
        return ModelResponse(text="It has shipped.")


def test_a_streamed_answer_and_the_next_iteration_header_are_on_separate_lines() -> None:
    out, err = io.StringIO(), io.StringIO()
    options = RunOptions(
        prompt="where is A-1?",
        model="scripted",
        tools=[f"{__name__}:TOOLS"],
        middleware=[],
        plain=True,
    )
    assert run_model_turn(options, Narrating(), out, err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert "assistant: Let me look that up." in lines
    assert "assistant: It has shipped." in lines
    assert [line for line in lines if line.startswith("iteration ")] == [
        "iteration 0  offered: lookup",
        "iteration 1  offered: lookup",
    ]
    assert lines.index("assistant: Let me look that up.") + 1 == lines.index(
        "iteration 0  offered: lookup"
    )
