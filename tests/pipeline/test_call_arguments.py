"""Arguments a model seam hands over already parsed (pipeline/calls/_arguments.py): a flat object of
JSON scalars is copied as it is, and gives exactly what the JSON round trip gives any other
mapping (same keys, values and types, a new dict the caller's changes do not reach)."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.calls._arguments import parse_arguments
from pipeline.errors import InvalidToolArgsError

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec=None)),
)


def round_trip(arguments: dict[Any, Any]) -> Any:
    return json.loads(json.dumps(arguments))


def same(a: Any, b: Any) -> bool:
    """Equal with the same types, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


@given(st.dictionaries(st.text(st.characters(codec=None)), scalars))
def test_a_flat_object_is_what_the_json_round_trip_gives(arguments: dict[str, Any]) -> None:
    parsed = parse_arguments("tool", arguments)
    assert isinstance(parsed, dict)
    assert parsed is not arguments
    assert same(parsed, round_trip(arguments))


class Level(enum.IntEnum):
    HIGH = 2


class Text(str):
    pass


@pytest.mark.parametrize(
    "arguments",
    [
        {"nested": {"a": [1, (2, 3)]}},
        {"level": Level.HIGH},
        {"text": Text("subclass")},
        {1: "an int key"},
        {"tuple": (1, 2)},
        OrderedDict(a=1),
    ],
    ids=["nested", "int-enum", "str-subclass", "int-key", "tuple", "ordered-dict"],
)
def test_anything_else_still_takes_the_json_round_trip(arguments: dict[Any, Any]) -> None:
    parsed = parse_arguments("tool", arguments)
    assert same(parsed, round_trip(arguments))


@pytest.mark.parametrize(
    "arguments",
    [
        '{"cents": NaN}',
        '{"cents": Infinity}',
        '{"cents": -Infinity}',
        '{"cents": 1e999}',
        '{"nested": {"cents": [1, -1e400]}}',
        {"cents": math.inf},
        {"cents": math.nan},
        {"nested": [math.inf]},
    ],
    ids=repr,
)
def test_a_number_json_has_no_spelling_for_is_refused(arguments: object) -> None:
    """NaN and infinities never reach a handler as ``nan``/``inf`` (nor an audit as null)."""
    with pytest.raises(InvalidToolArgsError, match="pay"):
        parse_arguments("pay", arguments)
