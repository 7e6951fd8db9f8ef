"""Structured tool outputs (JSON values, pydantic models, dataclasses) reach the model as JSON."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from pipeline import Tool, TurnRunner, canonical_json, tool
from pipeline.artifacts import SpooledJsonArtifact
from pipeline.calls import ToolCall
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall


class CallOnce:
    """Asks for one call of ``name``, then answers; keeps what the model was shown."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[ToolCall] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not request.tool_calls:
            call = ProposedToolCall(id="c1", name=self.name, arguments="{}")
            return ModelResponse(tool_calls=[call])
        self.seen.extend(request.tool_calls)
        return ModelResponse(text="done")


@dataclasses.dataclass
class Reading:
    sensor: str
    at: datetime


class Report(BaseModel):
    id: uuid.UUID
    readings: list[Reading]
    ok: bool = True


AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ID = uuid.UUID(int=7)


async def call_returning(value: Any, **options: Any) -> ToolCall:
    @tool(name="produce", **options)
    def produce() -> Any:
        """Return the value under test."""
        return value

    model = CallOnce("produce")
    result = await TurnRunner(model=model, tools=[produce]).run("go")
    assert result.status == "completed", result.errors
    [seen] = model.seen
    return seen


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": 1, "a": [True, None, 2.5]}, '{"a":[true,null,2.5],"b":1}'),
        ([1, "two", {"3": 4}], '[1,"two",{"3":4}]'),
        ((1, 2), "[1,2]"),
        ([], "[]"),
        (42, "42"),
        (2.5, "2.5"),
        (False, "false"),
        (None, "null"),
        (Reading("s1", AT), '{"at":"2026-11-27T12:00:00Z","sensor":"s1"}'),
        (
            Report(id=ID, readings=[Reading("s1", AT)]),
            '{"id":"00000000-0000-0000-0000-000000000007","ok":true,'
            '"readings":[{"at":"2026-11-27T12:00:00Z","sensor":"s1"}]}',
        ),
    ],
    ids=["dict", "list", "tuple", "empty-list", "int", "float", "bool", "none", "dataclass",
         "model"],
)
async def test_a_structured_return_reaches_the_model_as_canonical_json(
    value: Any, text: str
) -> None:
    seen = await call_returning(value)
    assert seen.results == text
    assert seen.inline is True
    assert not seen.is_error


async def test_a_large_structured_return_becomes_a_json_artifact_the_model_can_query() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(2_000)]
    seen = await call_returning(rows)
    assert isinstance(seen.results, SpooledJsonArtifact)
    assert seen.results.as_string() == canonical_json(rows)
    assert json.loads(seen.results.as_string())[1999] == {"id": 1999, "name": "row 1999"}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (object(), "returned object, which is not a tool output"),
        ({1, 2}, "returned set, which is not a tool output"),
        ({"when": object()}, "returned dict: which cannot be written as JSON"),
        (Reading("s1", object()), "returned Reading: which cannot be written as JSON"),  # type: ignore[arg-type]
    ],
    ids=["object", "set", "dict-holding-an-object", "dataclass-holding-an-object"],
)
async def test_a_return_that_is_not_json_data_is_an_error_the_model_reads(
    value: Any, says: str
) -> None:
    seen = await call_returning(value)
    assert seen.is_error
    assert says in str(seen.results)


def test_what_a_handler_returns_is_checked_by_mypy_not_at_construction() -> None:
    """`Tool` accepts any callable at run time; its return type is mypy's to check."""

    class NoArgs(BaseModel):
        pass

    def handler(args: NoArgs, ctx: Any, meta: Any) -> object:
        return object()

    unchecked: Any = handler
    assert Tool(name="t", description="d", input_schema=NoArgs, handler=unchecked).name == "t"
