from __future__ import annotations

import enum
import hashlib
import json
import math
import random
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline import canonical_json, tool_call_checksum

VECTORS_PATH = Path(__file__).parents[1] / "data" / "checksums.json"
VECTORS: list[dict[str, str]] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))["vectors"]


def _vector_id(vector: dict[str, str]) -> str:
    return f"{vector['tool']}:{vector['args_json']}"


@pytest.mark.parametrize("vector", VECTORS, ids=[_vector_id(v) for v in VECTORS])
def test_vector_canonical_text(vector: dict[str, str]) -> None:
    """Each shared vector's canonical text is reproduced exactly."""
    args = json.loads(vector["args_json"])
    assert canonical_json({"tool": vector["tool"], "args": args}) == vector["canonical"]


@pytest.mark.parametrize("vector", VECTORS, ids=[_vector_id(v) for v in VECTORS])
def test_vector_checksum(vector: dict[str, str]) -> None:
    """Each shared vector's SHA-256 checksum is reproduced exactly."""
    args = json.loads(vector["args_json"])
    assert tool_call_checksum(vector["tool"], args) == vector["sha256"]


def test_vectors_file_is_not_empty() -> None:
    """The shared vectors were found and read, so the parametrized tests above ran."""
    assert len(VECTORS) >= 9


def test_checksum_is_sha256_of_canonical_text() -> None:
    """The checksum is the lowercase hex SHA-256 of the UTF-8 canonical text of tool and args."""
    args = {"q": "é😀\ud800", "n": [1.5, None, True]}
    text = canonical_json({"tool": "search", "args": args})
    expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert tool_call_checksum("search", args) == expected
    assert expected == expected.lower()
    assert len(expected) == 64


def test_checksum_differs_for_different_args_and_tools() -> None:
    """Different tools or arguments give different checksums; identical pairs collide."""
    base = tool_call_checksum("search", {"q": "a"})
    assert tool_call_checksum("search", {"q": "a"}) == base
    assert tool_call_checksum("search", {"q": "b"}) != base
    assert tool_call_checksum("lookup", {"q": "a"}) != base


NUMBER_CASES = [
    (0, "0"),
    (-7, "-7"),
    (1.0, "1"),
    (-0.0, "0"),
    (0.0, "0"),
    (100.0, "100"),
    (0.1, "0.1"),
    (-2.5, "-2.5"),
    (0.1 + 0.2, "0.30000000000000004"),
    (1e-7, "1e-7"),
    (-1e-7, "-1e-7"),
    (1.5e-7, "1.5e-7"),
    (9.99e-7, "9.99e-7"),
    (1e-6, "0.000001"),
    (1.234e-5, "0.00001234"),
    (0.0001, "0.0001"),
    (1e16, "10000000000000000"),
    (1.5e16, "15000000000000000"),
    (1e20, "100000000000000000000"),
    (1.2345678901234568e20, "123456789012345680000"),
    (1e21, "1e+21"),
    (1.5e21, "1.5e+21"),
    (-1e21, "-1e+21"),
    (1e300, "1e+300"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (math.nan, "null"),
    (math.inf, "null"),
    (-math.inf, "null"),
    (2**53 - 1, "9007199254740991"),
    (-(2**53 - 1), "-9007199254740991"),
    (2**53, "9007199254740992"),
    (2**53 + 1, "9007199254740992"),
    (-(2**53 + 1), "-9007199254740992"),
    (2**64, "18446744073709552000"),
    (10**21, "1e+21"),
    (10**400, "null"),
    (-(10**400), "null"),
]


@pytest.mark.parametrize(("value", "expected"), NUMBER_CASES, ids=[e for _, e in NUMBER_CASES])
def test_numbers_format_as_javascript_does(value: float, expected: str) -> None:
    """Numbers are written as JavaScript's JSON.stringify writes the same double."""
    assert canonical_json(value) == expected
    assert canonical_json([value]) == f"[{expected}]"
    assert canonical_json({"k": value}) == f'{{"k":{expected}}}'


def test_numbers_inside_containers_match_top_level_formatting() -> None:
    """Fast-path and walked containers format numbers identically (mixed integral floats)."""
    values = [0.5, 1.0, 2**60, 1e-9, 12.25, -0.0]
    assert canonical_json(values) == "[0.5,1,1152921504606847000,1e-9,12.25,0]"
    assert canonical_json(values[:1] + values[4:5]) == "[0.5,12.25]"


STRING_CASES = [
    ("plain", '"plain"'),
    ('quote"', '"quote\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("\x00\x01\x1f", '"\\u0000\\u0001\\u001f"'),
    ("\x7f", '"\x7f"'),
    ("/", '"/"'),
    ("é中", '"é中"'),
    ("\u2028\u2029", '"\u2028\u2029"'),
    ("😀", '"😀"'),
    ("\ud83d\ude00", '"😀"'),
    ("\ud800", '"\\ud800"'),
    ("a\udfffb", '"a\\udfffb"'),
    ("\ude00\ud83d", '"\\ude00\\ud83d"'),
]


@pytest.mark.parametrize(("value", "expected"), STRING_CASES, ids=[e for _, e in STRING_CASES])
def test_strings_escape_as_javascript_does(value: str, expected: str) -> None:
    """Only quote, backslash and control characters are escaped; lone surrogates become \\udxxx."""
    assert canonical_json(value) == expected
    assert canonical_json({"k": value}) == f'{{"k":{expected}}}'
    assert canonical_json({"k": [value, 1.0]}) == f'{{"k":[{expected},1]}}'


def test_lone_surrogates_do_not_break_the_checksum() -> None:
    """A lone surrogate is escaped, so the text encodes to UTF-8 and the checksum is computed."""
    text = canonical_json({"s": "x\ud800"})
    assert text == '{"s":"x\\ud800"}'
    text.encode("utf-8")
    assert len(tool_call_checksum("t", {"s": "x\ud800", "\udc00": 1})) == 64


def test_keys_sort_by_utf16_code_units() -> None:
    """U+1F600 (surrogates D83D DE00) sorts before U+FF00, unlike code-point order."""
    assert canonical_json({"\uff00": 1, "😀": 2}) == '{"😀":2,"\uff00":1}'
    assert sorted(["\uff00", "😀"]) == ["\uff00", "😀"]  # Python's own order differs


def test_keys_sort_by_code_unit_not_insertion() -> None:
    """Keys sort by code unit: uppercase before lowercase, shorter prefix first."""
    value = {"b": 1, "a": 2, "B": 3, "ab": 4, "": 5, "é": 6}
    assert canonical_json(value) == '{"":5,"B":3,"a":2,"ab":4,"b":1,"é":6}'


def test_whitespace_and_nesting() -> None:
    """Output has no whitespace; lists keep their order; tuples are arrays; nesting sorts."""
    value = {"z": [3, {"y": 1, "x": (2, None)}], "a": {"c": False, "b": True}}
    assert canonical_json(value) == '{"a":{"b":true,"c":false},"z":[3,{"x":[2,null],"y":1}]}'
    assert canonical_json([]) == "[]"
    assert canonical_json({}) == "{}"
    assert canonical_json(None) == "null"


def test_bool_is_never_a_number() -> None:
    """True/False are written as true/false, and True and 1 give different texts."""
    assert canonical_json([True, False, 1, 0]) == "[true,false,1,0]"
    assert canonical_json({"a": True}) != canonical_json({"a": 1})
    assert tool_call_checksum("t", {"a": True}) != tool_call_checksum("t", {"a": 1})


def test_other_mappings_and_scalar_subclasses_are_json() -> None:
    """Any Mapping is an object; int/str/float subclasses such as enums are written by value."""

    class Color(enum.IntEnum):
        RED = 3

    class Mode(enum.StrEnum):
        FAST = "fast"

    value = MappingProxyType({"b": OrderedDict([("y", 1), ("x", 2)]), "a": Color.RED})
    assert canonical_json(value) == '{"a":3,"b":{"x":2,"y":1}}'
    assert canonical_json([Mode.FAST, Color.RED]) == '["fast",3]'


class _Opaque:
    pass


BAD_VALUES = [
    ("set", {"args": {"when": {1, 2}}}, "$.args.when", "set"),
    ("bytes", {"args": {"when": b"x"}}, "$.args.when", "bytes"),
    ("datetime", {"args": {"when": datetime(2024, 1, 1, tzinfo=UTC)}}, "$.args.when", "datetime"),
    ("object", {"args": {"when": _Opaque()}}, "$.args.when", "_Opaque"),
    ("decimal", {"a": [1, {"b": Decimal("1.5")}]}, "$.a[1].b", "Decimal"),
    ("int key", {"args": {1: "x"}}, "$.args", "object key 1 (int)"),
    ("tuple key", {"a": {(1, 2): "x"}}, "$.a", "object key (1, 2) (tuple)"),
    ("odd key", {"a b": {"c.d": frozenset()}}, '$["a b"]["c.d"]', "frozenset"),
    ("top level", {1, 2}, "$", "set"),
]


@pytest.mark.parametrize(
    ("value", "path", "what"),
    [case[1:] for case in BAD_VALUES],
    ids=[case[0] for case in BAD_VALUES],
)
def test_non_json_values_raise_type_error_naming_the_path(value: Any, path: str, what: str) -> None:
    """Values that are not JSON raise TypeError whose message names the path and the type."""
    with pytest.raises(TypeError) as info:
        canonical_json(value)
    message = str(info.value)
    assert f"at {path}:" in message
    assert what in message


def test_checksum_error_names_the_path_under_args() -> None:
    """tool_call_checksum reports a bad argument under $.args."""
    with pytest.raises(TypeError, match=r"\$\.args\.when\[1\]: bytes"):
        tool_call_checksum("t", {"when": [1, b"x"]})
    with pytest.raises(TypeError, match=r"\$\.tool"):
        tool_call_checksum(3, {})  # type: ignore[arg-type]


def test_circular_reference_raises_type_error() -> None:
    """A container that holds itself is not JSON: TypeError naming where the cycle closes."""
    looped: list[Any] = [1]
    looped.append({"again": looped})
    with pytest.raises(TypeError, match=r"at \$\.x\[1\]\.again: circular reference"):
        canonical_json({"x": looped})


def test_shared_subvalues_are_not_cycles() -> None:
    """The same list appearing twice (not nested in itself) is fine."""
    shared = [1, 2]
    assert canonical_json({"a": shared, "b": shared}) == '{"a":[1,2],"b":[1,2]}'


def test_deep_nesting_takes_the_walk_and_matches() -> None:
    """Values nested deeper than the fast path allows are written the same way."""
    value: Any = "leaf"
    for _ in range(100):
        value = {"k": [value]}
    assert canonical_json(value) == '{"k":[' * 100 + '"leaf"' + "]}" * 100


# --- properties -----------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_data = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def _reinsert(value: Any, rng: random.Random) -> Any:
    """Return an equal value whose dicts have shuffled insertion order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _reinsert(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_reinsert(item, rng) for item in value]
    return value


@given(json_data, st.randoms(use_true_random=False))
def test_key_insertion_order_does_not_matter(value: Any, rng: random.Random) -> None:
    """The same data with shuffled dict insertion order gives the same text and checksum."""
    shuffled = _reinsert(value, rng)
    assert canonical_json(shuffled) == canonical_json(value)
    assert tool_call_checksum("t", {"v": shuffled}) == tool_call_checksum("t", {"v": value})


@given(json_data)
def test_output_is_deterministic_and_utf8_safe(value: Any) -> None:
    """Encoding twice gives the same text, and the text always encodes to UTF-8."""
    first = canonical_json(value)
    assert canonical_json(value) == first
    first.encode("utf-8")


def _as_js_double(value: Any) -> Any:
    """What JSON.parse would give back: ints beyond 2**53-1 become their nearest double."""
    if isinstance(value, dict):
        return {key: _as_js_double(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_js_double(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53 - 1:
        return float(value)
    return value


json_text_data = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=6), children, max_size=4
        )
    ),
    max_leaves=20,
)


@given(json_text_data)
def test_output_parses_back_to_an_equal_value(value: Any) -> None:
    """json.loads of the text equals the input (as numbers, after JS's double rounding)."""
    text = canonical_json(value)
    assert _as_js_double(json.loads(text)) == _as_js_double(value)
    assert canonical_json(json.loads(text)) == text


@given(json_data)
def test_fast_path_and_walk_write_the_same_text(value: Any) -> None:
    """Wrapping data in a non-dict Mapping (which forces the explicit walk) changes nothing."""
    assert canonical_json(MappingProxyType({"v": value})) == canonical_json({"v": value})


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_follows_javascript_layout(value: float) -> None:
    """Finite floats round-trip in shortest digits, with an exponent only outside [1e-6, 1e21)."""
    text = canonical_json(value)
    assert float(text) == value
    magnitude = abs(value)
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        assert "e" not in text
        assert not text.endswith(".0")
    else:
        mantissa, exponent = text.lstrip("-").split("e")
        assert exponent[0] in "+-"
        assert not exponent[1:].startswith("0")
        assert not mantissa.endswith((".0", "."))
    digits = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
    shortest = repr(value).lstrip("-").split("e")[0].replace(".", "").strip("0")
    assert digits == shortest


@given(json_data)
def test_frozen_values_are_written_as_their_plain_copies(value: Any) -> None:
    """A record's frozen arguments (read-only dicts and lists) give the same text as the
    plain data they were frozen from."""
    from pipeline._frozen import freeze_json

    assert canonical_json(freeze_json(value)) == canonical_json(value)
    assert canonical_json(freeze_json({"v": value})) == canonical_json({"v": value})
