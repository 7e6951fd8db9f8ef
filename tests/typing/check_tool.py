"""Type checks for Tool, @tool, ToolRegistry and ToolCall (checked by mypy, never collected)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, assert_type

from pydantic import BaseModel
from typing_extensions import TypedDict

from pipeline import DispatchContext, Stash, Tool, ToolContext, ToolOutput, ToolRegistry, tool
from pipeline.calls import ToolCall
from pipeline.models import ToolDescription


class SearchArgs(BaseModel):
    query: str


class PointArgs(TypedDict):
    x: int


def search(args: SearchArgs, ctx: DispatchContext, meta: Stash) -> str:
    return args.query


async def asearch(args: SearchArgs, ctx: DispatchContext, meta: Stash) -> str:
    return args.query


def point(args: PointArgs, ctx: DispatchContext, meta: Stash) -> str:
    return str(args["x"])


search_tool = Tool(name="search", description="d", input_schema=SearchArgs, handler=search)
assert_type(search_tool, Tool[SearchArgs])
async_tool = Tool(name="a", description="d", input_schema=SearchArgs, handler=asearch)
assert_type(async_tool, Tool[SearchArgs])
point_tool = Tool(name="p", description="d", input_schema=PointArgs, handler=point)
assert_type(point_tool, Tool[PointArgs])
assert_type(search_tool.describe(), ToolDescription)
assert_type(search_tool.input_schema, type[SearchArgs])


async def validated() -> None:
    assert_type(search_tool.validate({"query": "q"}), SearchArgs)


def executor(ctx: ToolContext) -> None:
    assert_type(search_tool.bind(ctx), Callable[[Mapping[str, Any]], Awaitable[ToolOutput]])


# A handler whose argument type does not match the input schema is rejected.
Tool(name="x", description="d", input_schema=PointArgs, handler=search)  # type: ignore[arg-type]


# A handler returning something that is not a tool output is rejected.
class Opaque:
    """Neither JSON data, nor a pydantic model, nor a dataclass."""


def returns_opaque(args: SearchArgs, ctx: DispatchContext, meta: Stash) -> Opaque:
    return Opaque()


Tool(name="x", description="d", input_schema=SearchArgs, handler=returns_opaque)  # type: ignore[arg-type]


# Structured outputs are tool outputs: the model reads them as canonical JSON.
def returns_int(args: SearchArgs, ctx: DispatchContext, meta: Stash) -> int:
    return 1


Tool(name="x", description="d", input_schema=SearchArgs, handler=returns_int)


@dataclass
class Weather:
    city: str
    celsius: float


class Forecast(BaseModel):
    days: list[Weather]


@tool
def as_dict(city: str) -> dict[str, int]:
    """A JSON object (dict is invariant: a dict of ints is accepted all the same)."""
    return {city: 1}


@tool
async def as_list(city: str) -> list[dict[str, float | None]]:
    """A JSON array, from an async function."""
    return [{city: None}]


@tool
def as_number(city: str) -> float:
    """A number."""
    return 1.5


@tool
def as_model(city: str) -> Forecast:
    """A pydantic model."""
    return Forecast(days=[Weather(city, 1.0)])


@tool
async def as_dataclass(city: str) -> Weather:
    """A dataclass."""
    return Weather(city, 1.0)


@tool
def as_nothing(city: str) -> None:
    """None (JSON null)."""


@tool  # type: ignore[arg-type]
def as_object(city: str) -> object:
    """Not a tool output: anything at all."""
    return city


@tool(name="opaque")  # type: ignore[arg-type]
async def as_opaque(city: str) -> Opaque:
    """Not a tool output: a plain class instance."""
    return Opaque()


@tool  # type: ignore[arg-type]
def as_set(city: str) -> set[str]:
    """Not a tool output: a set is not JSON."""
    return {city}


@tool
def bare(query: str) -> str:
    """Search."""
    return query


@tool(name="named", trusted=True)
async def called(query: str) -> str:
    """Search."""
    return query


assert_type(bare, Tool[BaseModel])
assert_type(called, Tool[BaseModel])

registry = ToolRegistry([search_tool, bare])
assert_type(registry.get("search"), Tool[Any] | None)
assert_type(registry.visible(), list[Tool[Any]])
assert_type(ToolRegistry.merge([registry], on_collision="keep"), ToolRegistry)
ToolRegistry.merge([registry], on_collision="merge")  # type: ignore[arg-type]

call = ToolCall.completed(id=ToolCall.new_id(), tool="search", args={"query": "q"}, results="x")
assert_type(call, ToolCall)
assert_type(call.args, Mapping[str, Any])
