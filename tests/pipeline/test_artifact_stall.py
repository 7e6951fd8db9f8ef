"""A large JSON result never stalls the event loop that other turns run on.

The stdlib's JSON parser holds the interpreter lock until the whole value is built, so a query
that parses a body in a worker thread still keeps every other turn waiting. Bodies over
``json_max_bytes`` (1 MiB) are not parsed whole, and streamed JSON Lines parse at most that
much at once; the loop's longest stall is measured with `StallMeter` beside the turn. A turn
is played three times and the median of its worst stalls is judged: a stall the parse causes
comes back every time, one the machine's other load causes (the worker thread descheduled while
it holds the lock) does not.
"""

from __future__ import annotations

import json
import statistics

import pytest

from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.artifacts import SpooledJsonArtifact
from pipeline.errors import ToolDownstreamError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemorySpoolStore
from pipeline.testing import ScriptedModel, StallMeter

MB = 1 << 20
RECORD = '{"id": 12345, "name": "item 12345", "tags": ["a", "b"], "v": 0.5}'
STALL_LIMIT = 0.1
BOUND = SpooledJsonArtifact.json_max_bytes


def _document(size: int) -> str:
    """A strict-JSON document of about ``size`` characters: one object holding records."""
    count = size // (len(RECORD) + 1)
    return '{"items": [' + ",".join([RECORD] * count) + "]}"


def _query(call_id: str, name: str, **args: object) -> ModelResponse:
    arguments = json.dumps({"call_id": "big", **args})
    return ModelResponse(tool_calls=[ProposedToolCall(id=call_id, name=name, arguments=arguments)])


async def _run_queries(body: str) -> tuple[dict[str, str], float]:
    @tool(artifact_constructor=lambda: SpooledJsonArtifact)
    def fetch() -> str:
        """Fetch a large JSON document."""
        return body

    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ProposedToolCall(id="big", name="fetch", arguments="{}")]),
            _query("type", "artifact_json_type"),
            _query("get", "artifact_json_get", path="$.items[0].id"),
            _query("length", "artifact_json_length"),
            _query("head", "artifact_head", n=1),
            ModelResponse(text="done"),
        ]
    )
    runner = TurnRunner(executor=ToolLoopExecutor(model), tools=[fetch])
    worst: list[float] = []
    read: dict[str, str] = {}
    for _ in range(3):
        model.reset()
        async with StallMeter() as meter:
            result = await runner.run("go")
        worst.append(meter.worst)
        read = {c.id: str(c.results) for c in result.tool_calls}
    return read, statistics.median(worst)


async def test_a_50_mb_json_document_is_refused_without_stalling_the_loop() -> None:
    read, worst = await _run_queries(_document(50 * MB))
    assert worst < STALL_LIMIT
    assert "too large to parse as one JSON document" in read["get"]
    assert "artifact_grep" in read["get"]  # the refusal says what to use instead
    assert read["head"].startswith('{"items": [')  # text queries still answer


async def test_a_document_at_the_bound_is_queried_without_stalling_the_loop() -> None:
    read, worst = await _run_queries(_document(BOUND - 100))
    assert worst < STALL_LIMIT
    assert "[\n  12345\n]" in read["get"]
    assert "json" in read["type"]


@pytest.mark.parametrize("spot", ["first", "later"])
def test_a_json_lines_line_over_the_bound_is_refused_by_the_query_that_reads_it(
    spot: str,
) -> None:
    small = json.dumps({"id": 1})
    huge = json.dumps({"blob": "x" * (BOUND + 10)})
    lines = [huge, small] if spot == "first" else [small, small, huge]
    body = "\n".join(lines * 2) + "\n"
    artifact = SpooledJsonArtifact(MemorySpoolStore().write("a", body), format="jsonl")
    with pytest.raises(ToolDownstreamError, match="too large to parse") as info:
        artifact.json_length()
    assert getattr(info.value, "line", None) == lines.index(huge)
