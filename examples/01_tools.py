"""Defining tools: ``@tool`` and ``Tool(...)``, a registry, ``describe()`` and validation errors.

Run it with ``python examples/01_tools.py``. Everything here uses loopware's public API only.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

from pydantic import BaseModel, Field

from pipeline import DispatchContext, Stash, Tool, ToolRegistry, tool
from pipeline.errors import InvalidToolArgsError, InvalidToolError
from pipeline.testing import make_dispatch_context


# 1. The decorator: the signature is the schema, the docstring is the description.
@tool
def add(
    a: Annotated[int, Field(description="The first addend")],
    b: Annotated[int, Field(description="The second addend")] = 0,
) -> str:
    """Add two integers and return the sum as text."""
    return str(a + b)


# A parameter annotated DispatchContext receives the context and is not part of the schema.
@tool(name="remember", description="Store a note in the turn's stash.")
async def remember_note(note: str, ctx: DispatchContext) -> str:
    ctx.stash.update("notes", lambda notes: [*notes, note], default=[])
    return f"noted ({len(ctx.stash.get('notes'))} so far)"


# 2. The explicit constructor: a pydantic model plus a handler (args, ctx, meta).
class WeatherArgs(BaseModel):
    """Arguments of the weather tool."""

    city: str = Field(description="City name, e.g. 'Lisbon'")
    unit: str = Field(default="C", pattern="^[CF]$", description="C or F")


def weather_handler(args: WeatherArgs, ctx: DispatchContext, meta: Stash) -> str:
    temperature = meta.get(f"fake_readings.{args.city.lower()}", 20)
    return f"{args.city}: {temperature} degrees {args.unit}"


weather = Tool(
    name="weather",
    description="Current temperature for a city (from canned readings).",
    input_schema=WeatherArgs,
    handler=weather_handler,
    meta={"fake_readings": {"lisbon": 24, "oslo": 3}},
)


async def demo() -> None:
    # 3. A registry: insertion-ordered, with hidden tools that stay callable by name.
    registry = ToolRegistry([add, remember_note, weather])
    registry.hide("remember")
    print("all tools:    ", [t.name for t in registry.all()])
    print("visible tools:", [t.name for t in registry.visible()])

    # 4. describe(): what a model is told about a tool (plain JSON data).
    print(json.dumps(add.describe(), indent=2, sort_keys=True))

    # 5. Running a tool on its own: tool.bind(ctx)(raw_args) validates and runs it once
    #    (inside a turn, calls go through ctx.run_tool and the tool_call stage first).
    ctx = make_dispatch_context(tools=registry)
    print(await add.bind(ctx)({"a": 2, "b": 3}))
    print(await weather.bind(ctx)({"city": "Oslo"}))
    print(await remember_note.bind(ctx)({"note": "buy milk"}))
    print("stash now:", ctx.stash.all())

    # 6. Validation is strict: "5" is not an int, unknown keys are rejected.
    for bad in ({"a": "5"}, {"a": 1, "c": 2}, {"b": 1}):
        try:
            add.validate(bad)
        except InvalidToolArgsError as exc:
            print(f"rejected {bad}: {exc.code}, {len(exc.errors)} field error(s)")

    # 7. Building a tool from bad parts fails at once, naming the field.
    try:
        Tool(name="bad name!", description="x", input_schema=WeatherArgs, handler=weather_handler)
    except InvalidToolError as exc:
        print("invalid tool:", exc)


def main() -> None:
    asyncio.run(demo())


if __name__ == "__main__":
    main()
