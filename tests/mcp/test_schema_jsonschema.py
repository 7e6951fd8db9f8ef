"""Arguments are validated by one validator (``jsonschema_rs``) that agrees with the reference
implementation: an MCP tool's compiled schema (`schema_model`) accepts exactly the arguments
``jsonschema`` accepts for the schema the model is shown, on the simple typed schemas (the
commonest MCP input schema) and on schemas with more than types, and applies top-level
defaults only to what it accepts."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jsonschema")

from pipeline.mcp import schema_model

jsonschema: Any = importlib.import_module("jsonschema")  # untyped: used as Any
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
NAMES = ["a", "b", "text", "n"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)  # JSON data: no infinities
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@st.composite
def simple_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    properties: dict[str, Any] = {}
    for name in names:
        sub: dict[str, Any] = {}
        if draw(st.booleans()):
            sub["type"] = draw(st.sampled_from(TYPES))
        if draw(st.booleans()):
            sub["description"] = "a field"
        properties[name] = sub
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def accepts(schema: dict[str, Any], data: dict[str, Any]) -> bool:
    """Whether the compiled schema of ``schema`` accepts ``data``."""
    try:
        schema_model("tool", schema).model_validate(data)
    except ValueError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(schema=simple_schemas(), data=st.dictionaries(st.sampled_from([*NAMES, "x"]), json_values))
def test_a_simple_schema_accepts_exactly_what_jsonschema_accepts(
    schema: dict[str, Any], data: dict[str, Any]
) -> None:
    assert accepts(schema, data) is jsonschema.Draft202012Validator(schema).is_valid(data)


ECHO = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
    "required": ["text"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("data", "valid"),
    [
        ({"text": "hi"}, True),
        ({"text": "hi", "times": 3}, True),
        ({"text": "hi", "times": 3.0}, True),  # JSON Schema: 3.0 is an integer
        ({"text": "hi", "times": True}, False),
        ({"times": 3}, False),
        ({"text": "hi", "other": 1}, False),
    ],
    ids=["good", "good-with-times", "integral-float", "bool-not-int", "missing", "extra"],
)
def test_the_ordinary_call_is_judged_as_jsonschema_judges_it(
    data: dict[str, Any], valid: bool
) -> None:
    assert jsonschema.Draft202012Validator(ECHO).is_valid(data) is valid
    assert accepts(ECHO, data) is valid


@settings(max_examples=100, deadline=None)
@given(data=st.dictionaries(st.sampled_from(["a", "x"]), json_values))
@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}},  # extras allowed
        {"type": "object", "additionalProperties": True},
        {"type": "object", "properties": {"a": {"enum": [1]}}, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"minimum": 1}}, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {}, "required": ["ghost"], "additionalProperties": False},
    ],
    ids=["open", "extras", "enum", "minimum", "type-list", "ghost"],
)
def test_schemas_with_more_than_types_accept_what_jsonschema_accepts(
    schema: dict[str, Any], data: dict[str, Any]
) -> None:
    """The model is shown the schema with extras closed when it says nothing of them."""
    shown = schema_model("tool", schema).model_json_schema()
    assert accepts(schema, data) is jsonschema.Draft202012Validator(shown).is_valid(data)


def test_defaults_are_applied_to_accepted_arguments() -> None:
    schema = {k: v for k, v in ECHO.items() if k != "additionalProperties"}
    model = schema_model("echo", schema)
    assert model.model_validate({"text": "hi"}).as_dict() == {"text": "hi", "times": 1}
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        model.model_validate({"text": "hi", "other": 1})
    with pytest.raises(ValueError, match='is not of type "string"'):
        model.model_validate({"text": 5})
