"""MCP input schemas validate as strictly as pydantic-schema tools, with the same error calls."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("jsonschema_rs")

from pipeline import Tool, tool
from pipeline.errors import InvalidToolArgsError, InvalidToolError
from pipeline.mcp import MCPArguments, schema_model

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "default": 1},
    },
    "required": ["city"],
}


def mcp_tool(schema: dict[str, Any] = SCHEMA, name: str = "forecast") -> Tool[MCPArguments]:
    def handler(args: MCPArguments, ctx: object, meta: object) -> str:
        return json.dumps(args.as_dict())

    return Tool(
        name=name, description="d", input_schema=schema_model(name, schema), handler=handler
    )


@tool
def forecast(city: str, days: int = 1) -> str:
    """The same tool with a pydantic schema."""
    return city


def errors_of(t: Tool[Any], args: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(InvalidToolArgsError) as info:
        t.validate(args)
    assert info.value.code == "E_INVALID_TOOL_ARGS"
    assert info.value.tool_name == t.name
    return sorted((tuple(e["loc"]), e["type"]) for e in info.value.errors)


def test_the_model_sees_the_servers_schema_with_extras_closed() -> None:
    described = mcp_tool().describe()["input_schema"]
    assert described == {**SCHEMA, "additionalProperties": False}


def test_a_schema_that_says_what_extras_may_be_keeps_it() -> None:
    schema = {**SCHEMA, "additionalProperties": {"type": "string"}}
    t = mcp_tool(schema)
    assert t.describe()["input_schema"]["additionalProperties"] == {"type": "string"}
    assert t.validate({"city": "Oslo", "unit": "C"}).as_dict()["unit"] == "C"
    assert errors_of(t, {"city": "Oslo", "unit": 5}) == [(("unit",), "json_schema_type")]


def test_defaults_are_applied_and_never_shared_between_calls() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "default": []}}}
    t = mcp_tool(schema)
    first = t.validate({}).as_dict()
    first["tags"].append("x")
    assert t.validate({}).as_dict() == {"tags": []}
    assert mcp_tool().validate({"city": "Oslo"}).as_dict() == {"city": "Oslo", "days": 1}


@pytest.mark.parametrize(
    "args",
    [{}, {"city": 5}, {"city": "Oslo", "days": "5"}, {"city": "Oslo", "extra": 1}, {"days": 2.5}],
    ids=["missing", "wrong-type", "no-coercion", "unknown-key", "missing-and-float"],
)
def test_bad_arguments_fail_at_the_same_places_as_for_a_pydantic_tool(args: dict[str, Any]) -> None:
    ours = [loc for loc, _ in errors_of(mcp_tool(), args)]
    theirs = [loc for loc, _ in errors_of(forecast, args)]
    assert ours == theirs


def test_missing_and_unknown_keys_use_pydantics_error_types() -> None:
    assert errors_of(mcp_tool(), {"extra": 1}) == [
        (("city",), "missing"),
        (("extra",), "extra_forbidden"),
    ]


def test_a_bad_call_becomes_an_error_call_the_model_reads() -> None:
    from tests.mcp.conftest import runner, scripted

    executor = scripted([("a", "forecast", '{"city": "Oslo", "days": "5"}')])
    result = runner(executor, [mcp_tool()]).run_sync("go")
    (call,) = result.tool_calls
    assert call.is_error
    assert str(call.results).startswith("Error: E_INVALID_TOOL_ARGS: invalid arguments for tool")
    assert "days" in str(call.results)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"type": "strnig"}}},
        {"type": "object", "properties": {"x": {"minimum": "zero"}}},
        {"type": "array"},
        {"properties": {}},
        ["not", "an", "object"],
        {"type": "object", "required": "city"},
    ],
    ids=["bad-type-name", "bad-minimum", "array-root", "no-type", "not-a-dict", "bad-required"],
)
def test_an_invalid_schema_is_refused_with_a_reason(schema: Any) -> None:
    with pytest.raises(InvalidToolError) as info:
        schema_model("t", schema)
    assert info.value.field == "input_schema"
    assert "input_schema" in info.value.message


def test_huge_bad_payloads_give_a_short_error() -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "string"}}},
    }
    with pytest.raises(InvalidToolArgsError) as info:
        mcp_tool(schema).validate({"xs": list(range(10_000))})
    assert len(info.value.errors) <= 20
    assert len(str(info.value)) < 10_000


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_any_json_arguments_either_validate_or_raise_the_typed_error(args: dict[str, Any]) -> None:
    t = mcp_tool()
    try:
        value = t.validate(args)
    except InvalidToolArgsError as exc:
        json.dumps(exc.errors)  # the errors the model reads are JSON data
    else:
        assert set(value.as_dict()) <= {"city", "days"}
        assert isinstance(value.as_dict()["city"], str)


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


TREE = {
    "type": "object",
    "properties": {"tree": {"type": "array", "items": {"$ref": "#/properties/tree"}}},
}


def test_arguments_nested_past_the_limit_under_a_recursive_schema_are_refused_not_crashed() -> None:
    t = mcp_tool(TREE, name="grow")
    assert t.validate({"tree": nested(100)}).as_dict()["tree"] == nested(100)
    with pytest.raises(InvalidToolArgsError):
        t.validate({"tree": nested(600)})
    with pytest.raises(ValueError, match="nested deeper than 256 levels"):
        schema_model("grow", TREE).model_validate({"tree": nested(200_000)})  # no stack overflow


ORDER = {
    "type": "object",
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
            "required": ["name", "qty"],
        }
    },
    "properties": {"item": {"$ref": "#/$defs/Item"}, "note": {"type": "string"}},
    "required": ["item"],
}


def test_a_schema_with_defs_is_shown_as_written_and_validates_through_its_refs() -> None:
    t = mcp_tool(ORDER, name="order")
    shown = t.describe()["input_schema"]
    assert shown["$defs"] == ORDER["$defs"]
    assert shown["properties"]["item"] == {"$ref": "#/$defs/Item"}
    assert t.validate({"item": {"name": "tea", "qty": 2}}).as_dict() == {
        "item": {"name": "tea", "qty": 2}
    }
    assert errors_of(t, {"item": {"name": "tea", "qty": "two"}}) == [
        (("item", "qty"), "json_schema_type")
    ]


def test_a_schema_that_needs_a_ref_from_the_network_is_refused_and_nothing_is_fetched() -> None:
    asked: list[str] = []

    class Schemas(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Schemas)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/a.json"
    try:
        with pytest.raises(InvalidToolError) as info:
            schema_model("t", {"type": "object", "properties": {"a": {"$ref": url}}})
    finally:
        server.shutdown()
        server.server_close()
    assert info.value.field == "input_schema"
    assert url in info.value.message
    assert asked == []  # a server that would have answered was never asked


class _Silent:
    """A validator that refuses every argument without saying why."""

    def is_valid(self, data: object) -> bool:
        return False

    def iter_errors(self, data: object) -> Any:
        return iter(())


def test_arguments_a_validator_refuses_without_an_error_are_still_refused() -> None:
    model: type[MCPArguments] = type(
        "MCPArguments_silent",
        (MCPArguments,),
        {"__module__": __name__, "_validator": _Silent(), "_json_schema": {"type": "object"}},
    )
    with pytest.raises(ValueError, match="the schema refused them"):
        model.model_validate({"a": 1})


@pytest.mark.parametrize("dialect", [None, "http://json-schema.org/draft-07/schema#"])
def test_format_is_an_annotation_as_in_the_reference_validators(dialect: str | None) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"to": {"format": "email"}}}
    if dialect is not None:
        schema["$schema"] = dialect
    assert mcp_tool(schema).validate({"to": "not an address"}).as_dict() == {"to": "not an address"}


def test_a_lone_surrogate_the_schema_must_read_is_an_error_that_says_so() -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}}
    with pytest.raises(ValueError, match="lone surrogate"):
        schema_model("t", schema).model_validate({"code": "ab\ud800"})


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object()], ids=["bytes", "set", "object"])
def test_values_that_are_not_json_data_are_a_validation_error(value: object) -> None:
    model = schema_model("t", {"type": "object", "properties": {"v": {"type": "string"}}})
    with pytest.raises(ValueError, match="cannot validate these arguments"):
        model.model_validate({"v": value})


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_number_json_cannot_carry_is_refused_by_name(value: float) -> None:
    t = mcp_tool({"type": "object", "properties": {"n": {"type": "number"}}}, name="count")
    assert errors_of(t, {"n": value}) == [(("n",), "finite_number")]
    with pytest.raises(InvalidToolArgsError, match=f"JSON has no {value!r}"):
        t.validate({"n": value})


def test_arguments_too_deep_to_encode_are_the_typed_error_not_a_recursion_error() -> None:
    with pytest.raises(InvalidToolArgsError) as info:
        forecast.validate({"city": nested(5_000)})
    assert "not JSON data" in str(info.value)
