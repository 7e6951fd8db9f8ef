"""What a reader of the CLI's output relies on: lines that do not run together, arguments shown
whole, exit statuses told once, and counts that add up."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from loopware_cli._main import build_parser
from loopware_cli._replay import run_replay
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


LONG_QUERY = "refund policy for orders shipped to Norway after the 2026 price change " * 3


def transcript(tmp_path: Path) -> Path:
    arguments = json.dumps({"query": LONG_QUERY.strip(), "limit": 5})
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "search", "arguments": arguments}},
        ]},
        {"role": "tool", "tool_call_id": "a", "content": "?"},
        {"role": "assistant", "content": "y"},
    ]  # fmt: skip
    file = tmp_path / "t.json"
    file.write_text(json.dumps(messages), encoding="utf-8")
    return file


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def replayed(file: Path, out: io.StringIO, *flags: str) -> str:
    args = build_parser().parse_args(["replay", str(file), "--plain", *flags])
    assert run_replay(args, out, io.StringIO()) == 0
    [line] = [line for line in out.getvalue().splitlines() if line.startswith("  #0")]
    return line


def test_replay_shows_arguments_whole_in_a_file_or_a_pipe(tmp_path: Path) -> None:
    line = replayed(transcript(tmp_path), io.StringIO())
    assert LONG_QUERY.strip() in line
    assert line.endswith('"limit": 5}  messages[1]')


def test_replay_cuts_arguments_at_the_terminal_width_unless_asked_for_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    cut = replayed(transcript(tmp_path), Terminal())
    assert len(cut) <= 100
    assert "...  messages[1]" in cut
    assert len(cut) >= 95  # the width is used, not a fixed 40-odd characters
    whole = replayed(transcript(tmp_path), Terminal(), "--full-args")
    assert LONG_QUERY.strip() in whole
