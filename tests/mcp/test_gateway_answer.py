"""The fast lane's answers (loopware_cli/_gateway_answer.py): a plain-text result built
directly is the SDK runner's wire form byte for byte, on every protocol version and era, the
first time and when its ``_meta`` is reused; every other result takes the SDK's steps."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic_core import to_json

from loopware_cli._gateway_answer import Shaper, same_json

STAMP = {"name": "gateway", "version": "1"}
ERAS = [(v, v in MODERN_PROTOCOL_VERSIONS) for v in KNOWN_PROTOCOL_VERSIONS]
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"version": "2", "name": "upstream"}}

texts = st.text(max_size=20) | st.sampled_from(["", 'quote " and \\\\', "\u2028 é ✓"])
plain_block = texts.map(lambda t: types.TextContent(type="text", text=t))
odd_block = st.one_of(
    texts.map(
        lambda t: types.TextContent(
            type="text", text=t, annotations=types.Annotations(priority=0.5)
        )
    ),
    texts.map(lambda t: types.TextContent(type="text", text=t, _meta={"k": t})),
    st.just(types.ImageContent(type="image", data="AA==", mime_type="image/png")),
)
metas: st.SearchStrategy[dict[str, Any] | None] = st.one_of(
    st.none(),
    st.just(SERVER_INFO),
    st.just({}),
    st.just({"a": None, "b": {"c": None}}),
    st.dictionaries(st.sampled_from(["x", "y"]), st.integers() | st.booleans() | texts),
)
results = st.builds(
    lambda content, meta, is_error, structured: types.CallToolResult(
        content=content, _meta=meta, is_error=is_error, structured_content=structured
    ),
    st.lists(plain_block | odd_block, max_size=3),
    metas,
    st.booleans(),
    st.none() | st.just({"n": 1}),
)


@given(answers=st.lists(results, min_size=1, max_size=4), era=st.sampled_from(ERAS))
def test_every_answer_is_the_sdk_runners_wire_form(
    answers: list[types.CallToolResult], era: tuple[str, bool]
) -> None:
    version, modern = era
    shaper = Shaper(STAMP)
    for result in [*answers, *answers]:  # again: the remembered ``_meta`` is reused
        expected = to_json(Shaper(STAMP)._sdk_shape(result, version, modern))
        assert to_json(shaper.shape(result, version, modern)) == expected


@pytest.mark.parametrize(("version", "modern"), ERAS, ids=[v for v, _ in ERAS])
def test_an_upstream_result_with_its_server_info_is_built_directly(
    version: str, modern: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    shaper = Shaper(STAMP)
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="hi")], _meta=SERVER_INFO
    )
    first = to_json(shaper.shape(result, version, modern))
    sdk_steps: list[object] = []
    monkeypatch.setattr(Shaper, "_sdk_shape", lambda *a: sdk_steps.append(a))
    again = to_json(shaper.shape(result.model_copy(), version, modern))
    assert again == first
    assert sdk_steps == [], "the plain result took the SDK's steps"


@pytest.mark.parametrize(("version", "modern"), ERAS, ids=[v for v, _ in ERAS])
def test_a_meta_with_its_keys_in_another_order_is_written_in_its_own_order(
    version: str, modern: bool
) -> None:
    """The remembered ``_meta`` is not reused for an equal one whose keys come in another
    order (at any depth): each answer is the SDK runner's bytes."""
    shaper = Shaper(STAMP)
    for meta in ({"x": 0, "y": {"a": 1, "b": 2}}, {"y": {"a": 1, "b": 2}, "x": 0},
                 {"x": 0, "y": {"b": 2, "a": 1}}):  # fmt: skip
        result = types.CallToolResult(content=[], _meta=meta, is_error=False)
        expected = to_json(Shaper(STAMP)._sdk_shape(result, version, modern))
        assert to_json(shaper.shape(result, version, modern)) == expected


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"x": [1, "a", None]}, {"x": [1, "a", None]}, True),
        ({"x": 1}, {"x": True}, False),
        ({"x": 1}, {"x": 1.0}, False),
        ([1], (1,), False),
        ({"x": 1, "y": 2}, {"y": 2, "x": 1}, True),
        ({"x": {"y": []}}, {"x": {"y": [0]}}, False),
    ],
    ids=["equal", "int-bool", "int-float", "list-tuple", "key-order", "nested"],
)
def test_same_json_tells_json_types_apart(a: Any, b: Any, same: bool) -> None:
    assert same_json(a, b) is same
