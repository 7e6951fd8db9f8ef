"""The @tool decorator: the signature as the single source of truth for a Tool."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from pipeline import DispatchContext, Stash, Tool, tool
from pipeline.errors import InvalidToolArgsError, InvalidToolError
from pipeline.events import Event


class FakeContext:
    """A minimal ToolContext: records emitted events."""

    turn_id = "turn-1"

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


async def call(target: Tool[Any], args: dict[str, Any], ctx: Any = None) -> Any:
    return await target.bind(ctx if ctx is not None else FakeContext())(args)


def test_bare_decorator_builds_a_tool_from_the_signature() -> None:
    """Name, description and input schema come from the function."""

    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search the index.

        Returns the top hits as text.
        """
        return f"{query}:{limit}"

    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.description == "Search the index.\n\nReturns the top hits as text."
    schema = search.describe()["input_schema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"query", "limit"}
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"]["default"] == 10
    assert schema["additionalProperties"] is False


async def test_decorated_sync_function_runs_with_validated_arguments() -> None:
    """The function receives the validated arguments by parameter name, defaults applied."""

    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search."""
        return f"{query}:{limit}"

    assert await call(search, {"query": "q"}) == "q:10"
    assert await call(search, {"query": "q", "limit": 3}) == "q:3"


async def test_decorated_async_function_is_awaited() -> None:
    """An async function works the same way."""

    @tool
    async def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    assert await call(shout, {"text": "hi"}) == "HI"


def test_called_form_applies_every_option() -> None:
    """Keyword options override the name and description and set the flags and meta."""

    @tool(
        name="web-search",
        description="Search the web.",
        ephemeral=True,
        trusted=True,
        on_collision="replace",
        meta={"cost": 2},
    )
    def search(query: str) -> str:
        return query

    assert search.name == "web-search"
    assert search.description == "Search the web."
    assert search.ephemeral is True
    assert search.trusted is True
    assert search.on_collision == "replace"
    assert search.meta.get("cost") == 2


def test_annotated_field_description_reaches_the_schema() -> None:
    """``Annotated[T, Field(description=...)]`` is honoured in the JSON Schema."""

    @tool
    def search(query: Annotated[str, Field(description="What to look for")]) -> str:
        """Search."""
        return query

    assert search.describe()["input_schema"]["properties"]["query"]["description"] == (
        "What to look for"
    )


async def test_dispatch_context_parameter_receives_the_context_and_is_not_in_the_schema() -> None:
    """A DispatchContext-annotated parameter gets the executor's context."""
    received: list[object] = []

    @tool
    def who(name: str, ctx: DispatchContext) -> str:
        """Greet."""
        received.append(ctx)
        return name

    assert set(who.describe()["input_schema"]["properties"]) == {"name"}
    context = FakeContext()
    assert await call(who, {"name": "ada"}, context) == "ada"
    assert received == [context]


async def test_meta_parameter_receives_the_tool_meta_stash() -> None:
    """A parameter ``meta: Stash`` gets the tool's meta stash and is not in the schema."""

    @tool(meta={"unit": "km"})
    def distance(value: int, meta: Stash) -> str:
        """Format a distance."""
        return f"{value}{meta.get('unit')}"

    assert set(distance.describe()["input_schema"]["properties"]) == {"value"}
    assert await call(distance, {"value": 3}) == "3km"


def test_stash_parameter_with_another_name_is_rejected() -> None:
    """A Stash parameter must be named ``meta``: the turn stash lives on the context."""
    with pytest.raises(InvalidToolError) as info:

        @tool
        def bad(stash: Stash) -> str:
            """Bad."""
            return ""

    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "input_schema"
    assert "meta" in str(info.value)


async def test_validation_is_strict_through_the_decorator() -> None:
    """Generated models reject coercion and unknown keys like any tool."""

    @tool
    def add(a: int, b: int) -> str:
        """Add."""
        return str(a + b)

    for bad in ({"a": "1", "b": 2}, {"a": 1, "b": 2, "c": 3}):
        with pytest.raises(InvalidToolArgsError) as info:
            await call(add, bad)
        assert info.value.code == "E_INVALID_TOOL_ARGS"
    assert await call(add, {"a": 1, "b": 2}) == "3"


async def test_json_only_types_validate_from_strings() -> None:
    """A date parameter accepts an ISO string, as it would from JSON text."""

    @tool
    def weekday(day: dt.date) -> str:
        """Name the weekday."""
        return day.strftime("%A")

    assert await call(weekday, {"day": "2024-01-01"}) == "Monday"


def test_missing_docstring_without_description_is_rejected() -> None:
    """A function with neither docstring nor ``description=`` cannot become a tool."""
    with pytest.raises(InvalidToolError) as info:

        @tool
        def quiet(a: int) -> str:
            return str(a)

    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "description"


def test_missing_annotation_is_rejected() -> None:
    """Every schema parameter needs an annotation."""
    with pytest.raises(InvalidToolError) as info:

        @tool
        def loose(a, b: int) -> str:  # type: ignore[no-untyped-def]
            """Loose."""
            return ""

    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "input_schema"
    assert "'a'" in str(info.value)


def test_variadic_parameters_are_rejected() -> None:
    """``*args`` and ``**kwargs`` have no place in a JSON object schema."""
    with pytest.raises(InvalidToolError) as info:

        @tool
        def spread(*items: int) -> str:
            """Spread."""
            return ""

    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "input_schema"


def test_unresolvable_annotation_is_rejected() -> None:
    """A string annotation naming nothing raises InvalidToolError, not NameError."""
    with pytest.raises(InvalidToolError) as info:

        @tool
        def ghost(a: NoSuchType) -> str:  # type: ignore[name-defined]  # noqa: F821
            """Ghost."""
            return ""

    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert "NoSuchType" in str(info.value)


async def test_local_classes_in_string_annotations_resolve() -> None:
    """Annotations naming classes local to the decorating scope resolve."""

    class Point(BaseModel):
        x: int
        y: int

    @tool
    def norm(point: Point) -> str:
        """Manhattan norm."""
        return str(abs(point.x) + abs(point.y))

    assert await call(norm, {"point": {"x": 3, "y": -4}}) == "7"


async def test_parameters_pydantic_reserves_keep_their_names() -> None:
    """Parameters named like BaseModel attributes or with a leading underscore still work."""

    @tool
    def odd(json: str, model_config: int = 1, _private: bool = False) -> str:
        """Odd names."""
        return f"{json}|{model_config}|{_private}"

    assert set(odd.describe()["input_schema"]["properties"]) == {
        "json",
        "model_config",
        "_private",
    }
    assert await call(odd, {"json": "j", "model_config": 2, "_private": True}) == "j|2|True"


async def test_positional_only_parameters_are_passed_by_position() -> None:
    """Positional-only parameters are filled from the validated arguments in order."""

    @tool
    def pair(first: str, second: str, /, sep: str = "-") -> str:
        """Join two strings."""
        return f"{first}{sep}{second}"

    assert await call(pair, {"first": "a", "second": "b"}) == "a-b"


def test_bad_option_raises_invalid_tool_error() -> None:
    """Options are checked by the Tool rules."""
    policy: Any = "merge"
    with pytest.raises(InvalidToolError) as info:

        @tool(on_collision=policy)
        def f(a: int) -> str:
            """F."""
            return ""

    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "on_collision"


def test_non_callable_is_rejected() -> None:
    """Decorating something that is not a function raises InvalidToolError."""
    with pytest.raises(InvalidToolError) as info:
        tool(42)  # type: ignore[call-overload]
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"


def test_decorator_reports_its_public_module() -> None:
    """The decorator reports ``pipeline`` as its module."""
    assert tool.__module__ == "pipeline"
