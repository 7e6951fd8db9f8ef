"""The plain-text result recogniser (pipeline/mcp/_quick.py) against the SDK client's own
checks (``finish``): whatever it builds is the result the SDK's validation gives, on every
protocol version, with the same set fields; any other shape is left to the SDK's checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("mcp")

from hypothesis import given
from hypothesis import strategies as st
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

from pipeline.mcp._direct import finish
from pipeline.mcp._quick import quick_result

texts = st.text(st.characters(codec=None), max_size=30) | st.sampled_from(
    ["", "a\ud800b", "\udfff"]
)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
plain_block = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
odd_block = st.dictionaries(
    st.sampled_from(["type", "text", "annotations", "_meta", "data", "mimeType"]),
    scalars | st.just("text") | st.just("image") | st.just({"audience": ["user"]}),
    max_size=4,
)
blocks = st.lists(plain_block | odd_block, max_size=4)
metas = st.dictionaries(st.text(max_size=5), scalars, max_size=3)
results = st.one_of(
    st.fixed_dictionaries(
        {"content": st.lists(plain_block, max_size=4)},
        optional={
            "isError": st.booleans(),
            "_meta": metas,
            "resultType": st.sampled_from(["complete", "input_required"]),
        },
    ),
    st.dictionaries(
        st.sampled_from(
            ["content", "isError", "_meta", "structuredContent", "resultType", "ttlMs", "x"]
        ),
        blocks | scalars | metas | st.just("complete") | st.just("input_required"),
        max_size=4,
    ),
)


def sdk_result(version: str, raw: dict[str, Any]) -> Any:
    """What the SDK client's checks make of ``raw`` (None when they reject it)."""
    try:
        return finish(version, copy.deepcopy(raw))
    except Exception:
        return None


@given(raw=results, version=st.sampled_from([*KNOWN_PROTOCOL_VERSIONS, "2099-01-01"]))
def test_a_recognised_result_is_what_the_sdk_checks_build_on_every_version(
    raw: dict[str, Any], version: str
) -> None:
    before = copy.deepcopy(raw)
    quick = quick_result(version, raw)
    assert raw == before, "the recogniser changed its input"
    if quick is not None:
        sdk = sdk_result(version, raw)
        assert sdk is not None, f"the SDK rejects what the recogniser took ({version})"
        assert type(quick) is type(sdk)
        assert quick == sdk
        assert quick.meta is None or quick.meta is not raw["_meta"], "a copy, as validation makes"
        assert quick.model_fields_set == sdk.model_fields_set
        assert [b.model_fields_set for b in quick.content] == [
            b.model_fields_set for b in sdk.content
        ]
        assert [type(b) for b in quick.content] == [type(b) for b in sdk.content]
        assert quick.model_dump(by_alias=True, mode="python") == sdk.model_dump(
            by_alias=True, mode="python"
        )


MODERN, LEGACY = "2026-07-28", "2025-11-25"
SERVER_INFO = {"io.modelcontextprotocol/serverInfo": {"name": "echo", "version": "1"}}


@pytest.mark.parametrize(
    ("version", "raw"),
    [
        (LEGACY, {"content": [{"type": "text", "text": "hi"}]}),
        (LEGACY, {"content": [], "isError": True}),
        (LEGACY, {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        (
            MODERN,
            {
                "_meta": SERVER_INFO,
                "content": [{"type": "text", "text": "hi"}],
                "isError": False,
                "resultType": "complete",
            },
        ),
        (MODERN, {"content": [], "resultType": "complete"}),
    ],
    ids=[
        "legacy-text",
        "legacy-empty-error",
        "legacy-two-blocks",
        "modern-sdk-server",
        "modern-bare",
    ],
)
def test_plain_text_results_are_recognised(version: str, raw: dict[str, Any]) -> None:
    assert quick_result(version, raw) is not None


TEXT = {"type": "text", "text": "hi"}


@pytest.mark.parametrize(
    ("version", "raw"),
    [
        (LEGACY, {"content": [{**TEXT, "annotations": {"priority": 1}}]}),
        (LEGACY, {"content": [{**TEXT, "_meta": {}}]}),
        (LEGACY, {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
        (LEGACY, {"content": [TEXT], "isError": 0}),
        (LEGACY, {"content": [TEXT], "_meta": None}),
        (LEGACY, {"content": [TEXT], "structuredContent": {"a": 1}}),
        (LEGACY, {"content": [TEXT], "resultType": "complete"}),
        (LEGACY, {"content": [{"type": "text", "text": 5}]}),
        (LEGACY, {"content": (TEXT,)}),
        (LEGACY, {"isError": False}),
        (MODERN, {"content": [TEXT]}),
        (MODERN, {"content": [TEXT], "resultType": "input_required"}),
        ("2099-01-01", {"content": [TEXT]}),
    ],
    ids=[
        "annotations",
        "block-meta",
        "image",
        "int-flag",
        "null-meta",
        "structured",
        "legacy-result-type",
        "int-text",
        "tuple",
        "no-content",
        "modern-no-result-type",
        "modern-input-required",
        "unknown-version",
    ],
)
def test_any_other_shape_is_left_to_the_sdk_checks(version: str, raw: dict[str, Any]) -> None:
    assert quick_result(version, raw) is None
