"""Tool: construction rules, immutability, describe, strict validation and the executor."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as dt
import enum
import json
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, NotRequired

import pytest
from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator
from typing_extensions import TypedDict

from pipeline import Stash, Tool, ToolRegistry, tool_call_checksum
from pipeline.artifacts import ArtifactTool, SpooledArtifact, SpooledJsonArtifact
from pipeline.errors import (
    InvalidToolArgsError,
    InvalidToolError,
    LoopError,
    ToolDownstreamError,
    TurnAbortedError,
)
from pipeline.events import Event, ToolExecutionEnd, ToolExecutionStart

# --- shared fixtures -----------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class SearchArgs(BaseModel):
    query: str
    limit: int = 10
    tags: list[str] = []


class RichArgs(BaseModel):
    when: dt.datetime
    day: dt.date | None = None
    ident: uuid.UUID | None = None
    color: Color | None = None
    pair: tuple[int, int] | None = None
    ratio: float = 0.5


class FakeContext:
    """A minimal ToolContext: records emitted events."""

    def __init__(self, turn_id: str = "turn-1") -> None:
        self._turn_id = turn_id
        self.events: list[Event] = []

    @property
    def turn_id(self) -> str:
        return self._turn_id

    def emit(self, event: Event) -> None:
        self.events.append(event)


def _echo(args: SearchArgs, ctx: Any, meta: Stash) -> str:
    return f"{args.query}:{args.limit}"


def make_tool(**overrides: Any) -> Tool[Any]:
    fields: dict[str, Any] = {
        "name": "search",
        "description": "Search things.",
        "input_schema": SearchArgs,
        "handler": _echo,
    }
    fields.update(overrides)
    return Tool(**fields)


# --- construction --------------------------------------------------------------------------


def test_tool_exposes_its_fields_with_defaults() -> None:
    """A tool built with only the required fields reports the documented defaults."""
    tool = make_tool()
    assert tool.name == "search"
    assert tool.description == "Search things."
    assert tool.input_schema is SearchArgs
    assert tool.ephemeral is False
    assert tool.trusted is False
    assert tool.on_collision == "throw"
    assert tool.artifact_constructor is None
    assert tool.artifact_class is SpooledArtifact
    assert isinstance(tool.meta, Stash)
    assert tool.meta.all() == {}


def test_meta_is_stored_in_a_stash_as_a_copy() -> None:
    """``meta`` becomes a Stash seeded with a copy of the mapping."""
    seed = {"owner": {"team": "search"}}
    tool = make_tool(meta=seed)
    seed["owner"]["team"] = "changed"
    assert tool.meta.get("owner.team") == "search"


def test_artifact_constructor_is_called_once_and_its_class_kept() -> None:
    """The artifact constructor runs once at construction and its class is exposed."""
    calls: list[int] = []

    def constructor() -> type[SpooledArtifact]:
        calls.append(1)
        return SpooledJsonArtifact

    tool = make_tool(artifact_constructor=constructor)
    assert calls == [1]
    assert tool.artifact_class is SpooledJsonArtifact
    assert tool.artifact_constructor is constructor


class _NotAnObject(RootModel[int]):
    pass


class _PlainTypedDict(typing.TypedDict):
    a: int


class _CallableField(BaseModel):
    fn: Callable[[], int]


def _raises() -> type[SpooledArtifact]:
    raise RuntimeError("no class today")


BAD_FIELDS: list[tuple[str, dict[str, Any]]] = [
    ("name", {"name": ""}),
    ("name", {"name": "has space"}),
    ("name", {"name": "x" * 65}),
    ("name", {"name": "trailing\n"}),
    ("name", {"name": "naïve"}),
    ("name", {"name": 42}),
    ("description", {"description": ""}),
    ("description", {"description": "   "}),
    ("description", {"description": None}),
    ("input_schema", {"input_schema": SearchArgs(query="x")}),
    ("input_schema", {"input_schema": dict}),
    ("input_schema", {"input_schema": int}),
    ("input_schema", {"input_schema": _NotAnObject}),
    ("input_schema", {"input_schema": _PlainTypedDict}),
    ("input_schema", {"input_schema": _CallableField}),
    ("handler", {"handler": "not callable"}),
    ("handler", {"handler": lambda args: "one argument"}),
    ("artifact_constructor", {"artifact_constructor": "SpooledArtifact"}),
    ("artifact_constructor", {"artifact_constructor": lambda: str}),
    ("artifact_constructor", {"artifact_constructor": lambda: SpooledArtifact.__new__}),
    ("artifact_constructor", {"artifact_constructor": _raises}),
    ("meta", {"meta": ["not", "a", "mapping"]}),
    ("meta", {"meta": {"bad": object()}}),
    ("ephemeral", {"ephemeral": "yes"}),
    ("ephemeral", {"ephemeral": 1}),
    ("trusted", {"trusted": None}),
    ("on_collision", {"on_collision": "merge"}),
]


@pytest.mark.parametrize(
    ("field", "overrides"),
    BAD_FIELDS,
    ids=[f"{field}-{index}" for index, (field, _) in enumerate(BAD_FIELDS)],
)
def test_every_bad_field_raises_invalid_tool_error_naming_it(
    field: str, overrides: dict[str, Any]
) -> None:
    """Each broken field rule raises InvalidToolError whose ``field`` and message name it."""
    with pytest.raises(InvalidToolError) as info:
        make_tool(**overrides)
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == field
    assert field in str(info.value)


def test_name_accepts_the_provider_safe_set() -> None:
    """Letters, digits, ``_`` and ``-`` up to 64 characters are a valid name."""
    assert make_tool(name="A-z_09" + "x" * 58).name == "A-z_09" + "x" * 58


# --- immutability --------------------------------------------------------------------------


@pytest.mark.parametrize("attribute", ["name", "description", "_handler", "trusted", "new_attr"])
def test_assignment_raises_attribute_error(attribute: str) -> None:
    """Setting any attribute of a tool raises AttributeError and changes nothing."""
    tool = make_tool()
    with pytest.raises(AttributeError):
        setattr(tool, attribute, "x")
    assert tool.name == "search"


def test_copying_a_tool_or_a_registry_of_tools_works() -> None:
    """copy and deepcopy give back the (immutable) tool itself, so configs can be deep-copied."""
    tool = make_tool()
    assert copy.copy(tool) is tool
    assert copy.deepcopy(tool) is tool
    registry = copy.deepcopy(ToolRegistry([tool]))
    assert registry.get("search") is tool


def test_deletion_raises_attribute_error() -> None:
    """Deleting an attribute of a tool raises AttributeError."""
    tool = make_tool()
    with pytest.raises(AttributeError):
        del tool._name


def test_the_handler_has_no_public_accessor() -> None:
    """No public attribute exposes the handler: the executor is the only way to run it."""
    tool = make_tool()
    public = {name for name in dir(tool) if not name.startswith("_")}
    assert "handler" not in public
    assert all(getattr(tool, name) is not _echo for name in public)


def test_repr_names_the_tool_and_its_schema() -> None:
    """The repr shows the public class, name, schema and the flags that are on."""
    text = repr(make_tool(ephemeral=True))
    assert text.startswith("Tool(name='search'")
    assert "SearchArgs" in text
    assert "ephemeral=True" in text
    assert Tool.__module__ == "pipeline"


# --- describe ------------------------------------------------------------------------------


def test_describe_returns_name_description_and_json_schema() -> None:
    """describe() gives plain JSON data with an object schema that forbids unknown keys."""
    description = make_tool().describe()
    assert description["name"] == "search"
    assert description["description"] == "Search things."
    schema = description["input_schema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"]["default"] == 10
    assert schema["additionalProperties"] is False
    json.dumps(description)


def test_describe_is_built_once_and_nobody_can_change_it() -> None:
    """Every reader gets the one description, and changing it at any depth raises, so what the
    model is told about a tool never drifts."""
    tool = make_tool()
    first = tool.describe()
    assert tool.describe() is first
    with pytest.raises(TypeError, match="read-only"):
        first["name"] = "hacked"
    with pytest.raises(TypeError, match="read-only"):
        first["input_schema"]["properties"].clear()
    with pytest.raises(TypeError, match="read-only"):
        first["input_schema"]["required"].append("limit")
    assert tool.describe()["name"] == "search"
    assert "query" in tool.describe()["input_schema"]["properties"]


class Node(BaseModel):
    label: str
    children: list[Node] = []


def test_recursive_model_schema_has_an_object_at_the_root() -> None:
    """A self-referencing model's top-level ``$ref`` is inlined so the root is an object."""
    schema = make_tool(input_schema=Node).describe()["input_schema"]
    assert schema["type"] == "object"
    assert "$ref" not in schema
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_extra_allow_schema_does_not_claim_additional_properties_false() -> None:
    """A schema that allows extras is described without ``additionalProperties: false``."""

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int

    schema = make_tool(input_schema=Open).describe()["input_schema"]
    assert schema.get("additionalProperties") is not False


# --- validate ------------------------------------------------------------------------------


async def test_validate_applies_defaults() -> None:
    """Missing optional fields take their defaults."""
    args = make_tool().validate({"query": "q"})
    assert args == SearchArgs(query="q", limit=10, tags=[])


@pytest.mark.parametrize(
    ("raw", "loc", "error_type"),
    [
        ({"query": "q", "limit": "5"}, ["limit"], "int_type"),
        ({"query": 5}, ["query"], "string_type"),
        ({"query": "q", "limit": True}, ["limit"], "int_type"),
        ({"query": "q", "limit": 1.5}, ["limit"], "int_type"),
        ({"query": "q", "tags": "a"}, ["tags"], "list_type"),
        ({}, ["query"], "missing"),
    ],
    ids=["str-to-int", "int-to-str", "bool-to-int", "float-to-int", "str-to-list", "missing"],
)
async def test_validate_does_not_coerce(
    raw: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    """Strict mode: values of the wrong JSON type are rejected, not converted."""
    with pytest.raises(InvalidToolArgsError) as info:
        make_tool().validate(raw)
    error = info.value
    assert error.code == "E_INVALID_TOOL_ARGS"
    assert error.tool_name == "search"
    assert [(e["loc"], e["type"]) for e in error.errors] == [(loc, error_type)]
    assert str(loc[0]) in error.message
    assert "search" in error.message


async def test_validate_accepts_values_json_carries_as_strings() -> None:
    """Datetimes, dates, UUIDs, enum values and tuples validate as they would from JSON text."""
    ident = uuid.uuid4()
    args = make_tool(input_schema=RichArgs).validate(
        {
            "when": "2024-05-01T12:30:00Z",
            "day": "2024-05-02",
            "ident": str(ident),
            "color": "blue",
            "pair": [1, 2],
            "ratio": 2,
        }
    )
    assert args.when == dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    assert args.day == dt.date(2024, 5, 2)
    assert args.ident == ident
    assert args.color is Color.BLUE
    assert args.pair == (1, 2)
    assert args.ratio == 2.0


async def test_validate_rejects_a_bad_enum_value_with_the_json_error() -> None:
    """An enum value that is not a member fails with pydantic's JSON-mode enum error."""
    with pytest.raises(InvalidToolArgsError) as info:
        make_tool(input_schema=RichArgs).validate({"when": "2024-05-01T00:00Z", "color": 1})
    assert [e["loc"] for e in info.value.errors] == [["color"]]
    assert info.value.errors[0]["type"] == "enum"


async def test_validate_rejects_unknown_top_level_keys_with_the_other_errors() -> None:
    """Unknown keys are rejected, reported together with the other field errors."""
    with pytest.raises(InvalidToolArgsError) as info:
        make_tool().validate({"limit": "x", "surprise": 1})
    kinds = {(tuple(e["loc"]), e["type"]) for e in info.value.errors}
    assert kinds == {
        (("query",), "missing"),
        (("limit",), "int_type"),
        (("surprise",), "extra_forbidden"),
    }
    assert "surprise" in info.value.message
    json.dumps(info.value.errors)


async def test_validate_keeps_extras_when_the_model_allows_them() -> None:
    """A model configured with ``extra="allow"`` accepts and keeps unknown keys."""

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int

    args = make_tool(input_schema=Open).validate({"a": 1, "b": 2})
    assert args.model_extra == {"b": 2}


class Inner(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: int


class Outer(BaseModel):
    inner: Inner


async def test_nested_models_keep_their_own_extra_setting() -> None:
    """Only the top level is closed: a nested model that allows extras still keeps them."""
    tool = make_tool(input_schema=Outer)
    args = tool.validate({"inner": {"x": 1, "y": 2}})
    assert args.inner.model_extra == {"y": 2}
    with pytest.raises(InvalidToolArgsError) as info:
        tool.validate({"inner": {"x": 1}, "y": 2})
    assert info.value.errors[0]["type"] == "extra_forbidden"


class Aliased(BaseModel):
    search_query: str = Field(alias="q")


class AliasedByName(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    search_query: str = Field(alias="q")


async def test_aliases_are_the_accepted_keys() -> None:
    """An aliased field is read from its alias; its Python name is unknown by default."""
    assert (make_tool(input_schema=Aliased).validate({"q": "x"})).search_query == "x"
    with pytest.raises(InvalidToolArgsError) as info:
        make_tool(input_schema=Aliased).validate({"q": "x", "search_query": "y"})
    assert [(e["loc"], e["type"]) for e in info.value.errors] == [
        (["search_query"], "extra_forbidden")
    ]
    by_name = make_tool(input_schema=AliasedByName)
    assert (by_name.validate({"search_query": "x"})).search_query == "x"


class Renaming(BaseModel):
    query: str

    @model_validator(mode="before")
    @classmethod
    def _rename(cls, data: Any) -> Any:
        if isinstance(data, dict) and "q" in data:
            data = {"query": data["q"]}
        return data


async def test_a_before_validator_may_reshape_raw_keys() -> None:
    """A top-level ``mode="before"`` validator sees the raw keys before any key check."""
    args = make_tool(input_schema=Renaming).validate({"q": "x"})
    assert args.query == "x"


class Checked(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("n must be positive")
        return value


async def test_errors_are_json_safe_even_with_exception_context() -> None:
    """A custom validator's ValueError is reported as JSON-safe data with its message."""
    with pytest.raises(InvalidToolArgsError) as info:
        make_tool(input_schema=Checked).validate({"n": -1})
    json.dumps(info.value.errors)
    assert "n must be positive" in info.value.message


class TDArgs(TypedDict):
    a: int
    b: NotRequired[dt.date]


@dataclasses.dataclass
class DCArgs:
    a: int
    day: dt.date = dt.date(2000, 1, 1)


async def test_typeddict_and_dataclass_schemas_validate_strictly() -> None:
    """TypedDict and dataclass schemas get the same strict JSON-mode rules and key check."""
    td = make_tool(input_schema=TDArgs)
    assert td.validate({"a": 1, "b": "2024-01-02"}) == {"a": 1, "b": dt.date(2024, 1, 2)}
    dc = make_tool(input_schema=DCArgs)
    assert dc.validate({"a": 1}) == DCArgs(a=1)
    assert (dc.validate({"a": 1, "day": "2024-01-02"})).day == dt.date(2024, 1, 2)
    for schema_tool in (td, dc):
        with pytest.raises(InvalidToolArgsError):
            schema_tool.validate({"a": "1"})
        with pytest.raises(InvalidToolArgsError):
            schema_tool.validate({"a": 1, "zz": 0})


async def test_validate_accepts_any_mapping() -> None:
    """A read-only mapping is validated like a dict."""
    args = make_tool().validate(types.MappingProxyType({"query": "q"}))
    assert args.query == "q"


@pytest.mark.parametrize("raw", [["query"], "query", None, 5], ids=["list", "str", "none", "int"])
async def test_validate_rejects_non_objects(raw: Any) -> None:
    """Arguments that are not a JSON object raise InvalidToolArgsError."""
    with pytest.raises(InvalidToolArgsError) as info:
        make_tool().validate(raw)
    assert info.value.code == "E_INVALID_TOOL_ARGS"
    assert info.value.errors


# --- executor ------------------------------------------------------------------------------


async def test_executor_runs_a_sync_handler_and_emits_start_then_end() -> None:
    """A sync handler runs inline; start and end events carry the turn, call id and timing."""
    seen: list[int] = []
    ctx = FakeContext()

    def handler(args: SearchArgs, handler_ctx: Any, meta: Stash) -> str:
        seen.append(len(ctx.events))
        assert handler_ctx is ctx
        return "result"

    tool = make_tool(handler=handler)
    raw = {"query": "q"}
    assert await tool.bind(ctx)(raw) == "result"
    assert seen == [1]  # the start event was emitted before the handler ran
    start, end = ctx.events
    assert isinstance(start, ToolExecutionStart)
    assert isinstance(end, ToolExecutionEnd)
    checksum = tool_call_checksum("search", raw)
    assert start.call_id.startswith("call_")  # no provider id: bind() mints one per call
    for event in (start, end):
        assert event.turn_id == "turn-1"
        assert event.tool_name == "search"
        assert event.call_id == start.call_id
        assert event.checksum == checksum
        assert event.args == SearchArgs(query="q")
        assert event.started_at.tzinfo is not None
    assert end.started_at == start.started_at
    assert end.is_error is False
    assert end.duration_ms >= 0


async def test_checksum_is_over_the_raw_arguments() -> None:
    """The events' checksum is computed before defaults are applied."""
    ctx = FakeContext()
    await make_tool().bind(ctx)({"query": "q"})
    with_defaults = tool_call_checksum("search", {"query": "q", "limit": 10, "tags": []})
    assert ctx.events[0].checksum == tool_call_checksum("search", {"query": "q"})  # type: ignore[attr-defined]
    assert ctx.events[0].checksum != with_defaults  # type: ignore[attr-defined]


async def test_run_carries_the_provider_call_id_into_events_and_errors() -> None:
    """`Tool.run` keeps the provider's id: events carry it next to the checksum."""
    ctx = FakeContext()
    await make_tool().run(ctx, {"query": "q"}, call_id="toolu_01")
    start, end = ctx.events
    assert (start.call_id, end.call_id) == ("toolu_01", "toolu_01")  # type: ignore[attr-defined]
    assert start.checksum == tool_call_checksum("search", {"query": "q"})  # type: ignore[attr-defined]

    def boom(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        raise RuntimeError("down")

    with pytest.raises(ToolDownstreamError) as info:
        await make_tool(handler=boom).run(ctx, {"query": "q"}, call_id="toolu_02")
    assert info.value.call_id == "toolu_02"


async def test_executor_awaits_an_async_handler_and_measures_it() -> None:
    """An async handler is awaited; the end event's duration covers its run."""

    async def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        await asyncio.sleep(0.02)
        return args.query.upper()

    ctx = FakeContext()
    assert await make_tool(handler=handler).bind(ctx)({"query": "q"}) == "Q"
    end = ctx.events[-1]
    assert isinstance(end, ToolExecutionEnd)
    assert end.duration_ms >= 15


async def test_executor_awaits_an_awaitable_returned_by_a_sync_callable() -> None:
    """A plain callable returning a coroutine has its result awaited."""

    async def body() -> str:
        return "late"

    tool = make_tool(handler=lambda args, ctx, meta: body())
    assert await tool.bind(FakeContext())({"query": "q"}) == "late"


async def test_executor_returns_the_handler_value_unchanged() -> None:
    """Whatever the handler returns (here bytes) is returned as is, the same object."""
    payload = b"\x00binary"
    tool = make_tool(handler=lambda args, ctx, meta: payload)
    assert await tool.bind(FakeContext())({"query": "q"}) is payload


async def test_handler_receives_the_tool_meta_stash() -> None:
    """The handler's third argument is the tool's own meta stash."""
    received: list[Stash] = []

    def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        received.append(meta)
        return str(meta.get("unit"))

    tool = make_tool(handler=handler, meta={"unit": "km"})
    assert await tool.bind(FakeContext())({"query": "q"}) == "km"
    assert received == [tool.meta]


@pytest.mark.parametrize(
    "raw",
    [
        {"query": "q", "limit": "5"},
        {"query": "q", "extra": 1},
        {"query": {1, 2}},
        json.loads('{"query": ' + "[" * 700 + "]" * 700 + "}"),
    ],
    ids=["coercion", "unknown-key", "not-json", "too-deep"],
)
async def test_invalid_args_raise_without_events_or_handler_call(raw: dict[str, Any]) -> None:
    """Bad arguments raise InvalidToolArgsError; no event is emitted, the handler never runs."""
    calls: list[object] = []

    def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        calls.append(args)
        return "x"

    tool = make_tool(handler=handler)
    ctx = FakeContext()
    with pytest.raises(InvalidToolArgsError) as info:
        await tool.bind(ctx)(raw)
    assert info.value.code == "E_INVALID_TOOL_ARGS"
    assert info.value.tool_name == "search"
    assert ctx.events == []
    assert calls == []


async def test_handler_exception_is_wrapped_with_its_cause() -> None:
    """A handler error becomes ToolDownstreamError chained to it; the end event flags it."""
    original = ValueError("disk on fire")

    def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        raise original

    ctx = FakeContext()
    with pytest.raises(ToolDownstreamError) as info:
        await make_tool(handler=handler).bind(ctx)({"query": "q"})
    error = info.value
    assert error.code == "E_TOOL_DOWNSTREAM_ERROR"
    assert error.__cause__ is original
    assert error.tool_name == "search"
    assert error.call_id is not None
    assert error.call_id.startswith("call_")
    assert "disk on fire" in str(error)
    assert "ValueError" in str(error)
    end = ctx.events[-1]
    assert isinstance(end, ToolExecutionEnd)
    assert end.is_error is True
    assert [type(e) for e in ctx.events] == [ToolExecutionStart, ToolExecutionEnd]


async def test_async_handler_exception_is_wrapped_too() -> None:
    """An awaited handler's exception is wrapped the same way."""

    async def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        raise KeyError("gone")

    with pytest.raises(ToolDownstreamError) as info:
        await make_tool(handler=handler).bind(FakeContext())({"query": "q"})
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize(
    "error",
    [TurnAbortedError("stop"), InvalidToolArgsError("bad pattern"), LoopError("plain")],
    ids=["turn-aborted", "invalid-args", "loop-error"],
)
async def test_loop_errors_from_the_handler_are_reraised_unchanged(error: LoopError) -> None:
    """A LoopError raised by the handler (abort included) propagates as the same object."""

    def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        raise error

    ctx = FakeContext()
    with pytest.raises(LoopError) as info:
        await make_tool(handler=handler).bind(ctx)({"query": "q"})
    assert info.value is error
    assert info.value.code == error.code
    end = ctx.events[-1]
    assert isinstance(end, ToolExecutionEnd)
    assert end.is_error is True


async def test_cancellation_propagates_unchanged_after_the_end_event() -> None:
    """Cancelling a running handler raises CancelledError and still emits the end event."""
    started = asyncio.Event()

    async def handler(args: SearchArgs, ctx: Any, meta: Stash) -> str:
        started.set()
        await asyncio.sleep(3600)
        return "never"

    ctx = FakeContext()
    execute = make_tool(handler=handler).bind(ctx)

    async def call() -> object:
        return await execute({"query": "q"})

    task = asyncio.create_task(call())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    end = ctx.events[-1]
    assert isinstance(end, ToolExecutionEnd)
    assert end.is_error is True


async def test_one_executor_serves_many_calls() -> None:
    """An executor can be called repeatedly; each call emits its own pair of events."""
    ctx = FakeContext()
    execute = make_tool().bind(ctx)
    assert await execute({"query": "a"}) == "a:10"
    assert await execute({"query": "b", "limit": 2}) == "b:2"
    assert len(ctx.events) == 4


async def test_with_handler_copy_keeps_subclass_attributes() -> None:
    """Wrapping the handler of a Tool subclass (an ArtifactTool) keeps its own attributes."""

    class CallArgs(BaseModel):
        call_id: str

    def shout(handler: Any) -> Any:
        return lambda args, ctx, meta: handler(args, ctx, meta).upper()

    original = ArtifactTool(
        name="artifact_head",
        description="Head of an artifact.",
        input_schema=CallArgs,
        handler=lambda args, ctx, meta: "head",
        queries=SpooledJsonArtifact,
    )
    wrapped = original.with_handler(shout)
    assert type(wrapped) is ArtifactTool
    assert wrapped.queries is SpooledJsonArtifact
    assert wrapped.ephemeral is True
    assert await wrapped.bind(FakeContext())({"call_id": "c"}) == "HEAD"
