"""The fast yes for simple argument schemas never says yes where jsonschema says no, says yes
for the ordinary good call, and stays out of every schema it does not fully understand."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("jsonschema")

from pipeline.mcp import schema_model
from pipeline.mcp._schema import quick_accept

jsonschema: Any = importlib.import_module("jsonschema")  # untyped: used as Any
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
NAMES = ["a", "b", "text", "n"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
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


@settings(max_examples=400, deadline=None)
@given(schema=simple_schemas(), data=st.dictionaries(st.sampled_from([*NAMES, "x"]), json_values))
def test_the_fast_yes_never_accepts_what_jsonschema_rejects(
    schema: dict[str, Any], data: dict[str, Any]
) -> None:
    quick = quick_accept(schema)
    assert quick is not None
    if quick(data):
        assert jsonschema.Draft202012Validator(schema).is_valid(data)


def test_the_ordinary_good_call_takes_the_fast_yes() -> None:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
        "required": ["text"],
        "additionalProperties": False,
    }
    quick = quick_accept(schema)
    assert quick is not None
    assert quick({"text": "hi"})
    assert quick({"text": "hi", "times": 3})
    assert not quick({"text": "hi", "times": True})  # jsonschema decides (and rejects)
    assert not quick({"text": "hi", "times": 3.0})  # jsonschema decides (and accepts)
    assert not quick({"times": 3})
    assert not quick({"text": "hi", "other": 1})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}},  # extras allowed
        {"type": "object", "additionalProperties": True},
        {"type": "object", "properties": {"a": {"enum": [1]}}, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"minimum": 1}}, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": {"format": "email"}}, "additionalProperties": False},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"type": "object", "properties": {}, "required": ["ghost"], "additionalProperties": False},
    ],
    ids=["open", "extras", "enum", "minimum", "type-list", "format", "draft-04", "ghost"],
)
def test_schemas_with_more_than_types_get_no_fast_yes(schema: dict[str, Any]) -> None:
    assert quick_accept(schema) is None


def test_arguments_validate_the_same_with_and_without_the_fast_yes() -> None:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
        "required": ["text"],
    }
    model = schema_model("echo", schema)
    assert model.model_validate({"text": "hi"}).as_dict() == {"text": "hi", "times": 1}
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        model.model_validate({"text": "hi", "other": 1})
    with pytest.raises(ValueError, match="is not of type 'string'"):
        model.model_validate({"text": 5})
