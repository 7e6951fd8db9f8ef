"""ToolCall: the frozen record of a completed call, its checks and its read-only arguments."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from pipeline import tool_call_checksum
from pipeline.artifacts import Media, SpooledArtifact
from pipeline.calls import ToolCall
from pipeline.errors import InvalidToolCallError
from pipeline.stores import MemorySpoolStore

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
CHECKSUM = "a" * 64


def artifact(text: str = "line one\nline two") -> SpooledArtifact:
    return SpooledArtifact(MemorySpoolStore().write("call_1", text))


def image() -> Media:
    return Media.tool_generated("image", "image/png", "chart.png", b"\x89PNG")


def fields(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": "call_1",
        "tool": "search",
        "args": {"query": "q"},
        "checksum": CHECKSUM,
        "is_complete": True,
        "is_error": False,
        "results": "ok",
        "created_at": NOW,
        "updated_at": NOW,
        "completed_at": NOW,
    }
    values.update(overrides)
    return values


# --- completed() ---------------------------------------------------------------------------


def test_completed_fills_checksum_and_timestamps() -> None:
    """completed() checksums the raw args and stamps one aware UTC time on all three fields."""
    before = datetime.now(UTC)
    call = ToolCall.completed(id="call_1", tool="search", args={"query": "q"}, results="hits")
    assert call.checksum == tool_call_checksum("search", {"query": "q"})
    assert call.is_complete is True
    assert call.is_error is False
    assert call.from_artifact_tool is False
    assert call.inline is False
    assert call.created_at == call.updated_at == call.completed_at
    assert call.completed_at is not None
    assert call.completed_at.tzinfo is not None
    assert before <= call.created_at <= datetime.now(UTC)


def test_completed_parses_json_text_arguments() -> None:
    """A JSON-object string is parsed; the checksum is the one of the parsed object."""
    text = '{"query": "q", "n": [1, 2]}'
    call = ToolCall.completed(id="c", tool="search", args=text, results="x")
    assert call.args == {"query": "q", "n": [1, 2]}
    assert call.checksum == tool_call_checksum("search", {"query": "q", "n": [1, 2]})


def test_completed_passes_its_flags_through() -> None:
    """is_error, from_artifact_tool and inline reach the record."""
    call = ToolCall.completed(
        id="c",
        tool="t",
        args={},
        results="Error: nope",
        is_error=True,
        from_artifact_tool=True,
        inline=True,
    )
    assert (call.is_error, call.from_artifact_tool, call.inline) == (True, True, True)


def test_identical_requests_share_a_checksum_but_not_an_id() -> None:
    """The checksum names what was asked; the id names the call."""
    first = ToolCall.completed(id=ToolCall.new_id(), tool="t", args={"a": 1}, results="x")
    second = ToolCall.completed(id=ToolCall.new_id(), tool="t", args={"a": 1}, results="y")
    assert first.checksum == second.checksum
    assert first.id != second.id


def test_new_id_is_prefixed_and_unique() -> None:
    """new_id() makes ``call_`` plus 32 hex digits, different every time."""
    ids = {ToolCall.new_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"call_[0-9a-f]{32}", i) for i in ids)


# --- immutability --------------------------------------------------------------------------


def test_record_is_frozen() -> None:
    """Assigning a field raises FrozenInstanceError."""
    call = ToolCall(**fields())
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.tool = "other"  # type: ignore[misc]


def test_args_are_read_only_all_the_way_down() -> None:
    """Neither the mapping nor nested containers can be changed."""
    call = ToolCall(**fields(args={"q": "x", "opts": {"tags": ["b", "a"]}}))
    args: Any = call.args
    tags: Any = args["opts"]["tags"]
    mutations: list[Callable[[], object]] = [
        lambda: args.__setitem__("q", "y"),
        lambda: args.__delitem__("q"),
        lambda: args.__ior__({"z": 1}),
        lambda: args.pop("q"),
        lambda: args.popitem(),
        lambda: args.setdefault("z", 1),
        lambda: args.update(z=1),
        lambda: args.clear(),
        lambda: args["opts"].__setitem__("k", 1),
        lambda: tags.__setitem__(0, "c"),
        lambda: tags.__delitem__(0),
        lambda: tags.__iadd__(["c"]),
        lambda: tags.__imul__(2),
        lambda: tags.append("c"),
        lambda: tags.extend(["c"]),
        lambda: tags.insert(0, "c"),
        lambda: tags.pop(),
        lambda: tags.remove("a"),
        lambda: tags.clear(),
        lambda: tags.sort(),
        lambda: tags.reverse(),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError):
            mutate()
    assert call.args == {"q": "x", "opts": {"tags": ["b", "a"]}}


def test_args_are_copied_from_the_caller() -> None:
    """Changing the mapping given at construction does not change the record."""
    given = {"opts": {"tags": ["a"]}}
    call = ToolCall(**fields(args=given))
    given["opts"]["tags"].append("b")
    given["new"] = {}
    assert call.args == {"opts": {"tags": ["a"]}}


def test_args_behave_as_plain_data() -> None:
    """The read-only args serialise, validate, copy and pickle like plain dicts and lists."""

    class Model(BaseModel):
        opts: dict[str, list[str]]

    call = ToolCall(**fields(args={"opts": {"tags": ["a", "b"]}}))
    assert json.loads(json.dumps(call.args)) == {"opts": {"tags": ["a", "b"]}}
    assert Model.model_validate(call.args, strict=True).opts == {"tags": ["a", "b"]}
    assert copy.deepcopy(call.args) == call.args
    assert pickle.loads(pickle.dumps(call.args)) == call.args
    assert pickle.loads(pickle.dumps(call)) == call
    assert isinstance(call.args, dict)


# --- results ---------------------------------------------------------------------------------


def test_results_list_becomes_a_tuple() -> None:
    """A list of media or of artifacts is stored as a tuple."""
    media = [image(), image()]
    call = ToolCall(**fields(results=media))
    assert call.results == tuple(media)
    assert isinstance(call.results, tuple)
    artifacts = [artifact(), artifact("x")]
    assert ToolCall(**fields(results=artifacts)).results == tuple(artifacts)


@pytest.mark.parametrize(
    "results",
    ["", "text", "artifact", "media", "media-tuple"],
    ids=["empty-text", "text", "artifact", "media", "media-tuple"],
)
def test_single_results_are_kept_as_given(results: str) -> None:
    """Text, one artifact, one media item or a tuple of media are stored unchanged."""
    value: Any = {
        "": "",
        "text": "text",
        "artifact": artifact(),
        "media": image(),
        "media-tuple": (image(),),
    }[results]
    assert ToolCall(**fields(results=value)).results is value


# --- bad parts ------------------------------------------------------------------------------

NAIVE = datetime(2024, 1, 1, 12, 0)


def _bad_results() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("results", {"results": b"bytes"}),
        ("results", {"results": []}),
        ("results", {"results": ()}),
        ("results", {"results": [image(), artifact()]}),
        ("results", {"results": ["a", "b"]}),
        ("results", {"results": None}),
        ("results", {"results": 42}),
    ]


BAD_PARTS: list[tuple[str, dict[str, Any]]] = [
    ("id", {"id": ""}),
    ("id", {"id": 7}),
    ("tool", {"tool": ""}),
    ("tool", {"tool": None}),
    ("args", {"args": "[1, 2]"}),
    ("args", {"args": "{not json"}),
    ("args", {"args": 5}),
    ("args", {"args": ["a"]}),
    ("args", {"args": {1: "x"}}),
    ("args", {"args": {"when": NOW}}),
    ("args", {"args": {"deep": [{"x": {1, 2}}]}}),
    ("checksum", {"checksum": "abc"}),
    ("checksum", {"checksum": "A" * 64}),
    ("checksum", {"checksum": None}),
    ("is_complete", {"is_complete": 1}),
    ("is_error", {"is_error": "no"}),
    ("from_artifact_tool", {"from_artifact_tool": None}),
    ("inline", {"inline": "yes"}),
    ("created_at", {"created_at": NAIVE}),
    ("created_at", {"created_at": "2024-01-01T00:00:00Z"}),
    ("updated_at", {"updated_at": NAIVE}),
    ("completed_at", {"completed_at": NAIVE}),
    ("completed_at", {"completed_at": None}),
    ("completed_at", {"is_complete": False}),
]


@pytest.mark.parametrize(
    ("field", "overrides"),
    BAD_PARTS,
    ids=[f"{field}-{index}" for index, (field, _) in enumerate(BAD_PARTS)],
)
def test_bad_parts_raise_invalid_tool_call_error_naming_the_field(
    field: str, overrides: dict[str, Any]
) -> None:
    """Every bad field raises InvalidToolCallError with ``field`` set to it."""
    with pytest.raises(InvalidToolCallError) as info:
        ToolCall(**fields(**overrides))
    assert info.value.code == "E_INVALID_INITIAL_TOOL_CALL_VALUE"
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    "index",
    range(7),
    ids=["bytes", "empty-list", "empty-tuple", "mixed", "strings", "none", "int"],
)
def test_bad_results_raise_invalid_tool_call_error(index: int) -> None:
    """Bytes, empty or mixed sequences and other types are not results."""
    field, overrides = _bad_results()[index]
    with pytest.raises(InvalidToolCallError) as info:
        ToolCall(**fields(**overrides))
    assert info.value.code == "E_INVALID_INITIAL_TOOL_CALL_VALUE"
    assert info.value.field == field


def test_bad_args_name_the_nested_path() -> None:
    """A non-JSON value deep in the args is reported with its path."""
    with pytest.raises(InvalidToolCallError) as info:
        ToolCall(**fields(args={"deep": [{"x": {1, 2}}]}))
    assert "args.deep[0].x" in str(info.value)


def test_circular_args_are_rejected_not_crashing() -> None:
    """Self-referencing arguments raise InvalidToolCallError."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(InvalidToolCallError) as info:
        ToolCall(**fields(args=loop))
    assert info.value.code == "E_INVALID_INITIAL_TOOL_CALL_VALUE"


def _deep_text(depth: int) -> str:
    return '{"a": ' + "[" * depth + "]" * depth + "}"


DEEP_ARGS: dict[str, Callable[[], Any]] = {
    "json-text-unparseable": lambda: _deep_text(100_000),
    "json-text": lambda: _deep_text(700),
    "mapping": lambda: json.loads(_deep_text(700)),
}


@pytest.mark.parametrize("make", list(DEEP_ARGS.values()), ids=list(DEEP_ARGS))
def test_deeply_nested_args_are_rejected_not_crashing(make: Callable[[], Any]) -> None:
    """Arguments nested too deeply raise InvalidToolCallError, never RecursionError."""
    with pytest.raises(InvalidToolCallError, match="nested too deeply"):
        ToolCall.completed(id="c", tool="t", args=make(), results="x")


def test_records_are_hashable_consistently_with_equality() -> None:
    """A frozen record can go in a set or be a dict key, despite its dict-typed args."""
    call = ToolCall.completed(id="c", tool="t", args={"q": ["x"]}, results="x")
    twin = dataclasses.replace(call)
    assert twin == call
    assert hash(twin) == hash(call)
    assert {call, twin} == {call}


def test_completed_rejects_bad_parts_too() -> None:
    """completed() raises InvalidToolCallError for bad args, tool or results."""
    cases: list[dict[str, Any]] = [
        {"id": "c", "tool": "t", "args": "[]", "results": "x"},
        {"id": "c", "tool": "", "args": {}, "results": "x"},
        {"id": "c", "tool": "t", "args": {"a": object()}, "results": "x"},
        {"id": "c", "tool": "t", "args": {}, "results": []},
        {"id": "", "tool": "t", "args": {}, "results": "x"},
    ]
    for case in cases:
        with pytest.raises(InvalidToolCallError) as info:
            ToolCall.completed(**case)
        assert info.value.code == "E_INVALID_INITIAL_TOOL_CALL_VALUE"


def test_any_timezone_is_accepted() -> None:
    """Aware datetimes in any zone are valid."""
    tz = timezone(timedelta(hours=5))
    call = ToolCall(**fields(created_at=NOW.astimezone(tz)))
    assert call.created_at == NOW


def test_incomplete_record_has_no_completion_time() -> None:
    """A record with is_complete=False and completed_at=None is valid."""
    call = ToolCall(**fields(is_complete=False, completed_at=None))
    assert call.completed_at is None


def test_direct_construction_defaults() -> None:
    """created_at/updated_at default to now; from_artifact_tool and inline to False."""
    call = ToolCall(
        id="c",
        tool="t",
        args={},
        checksum=CHECKSUM,
        is_complete=False,
        is_error=False,
        results="x",
    )
    assert call.created_at.tzinfo is not None
    assert call.completed_at is None
    assert (call.from_artifact_tool, call.inline) == (False, False)


def test_replace_revalidates() -> None:
    """dataclasses.replace builds a checked record; a bad change raises."""
    call = ToolCall(**fields())
    as_list: Any = [image()]
    changed = dataclasses.replace(call, results=as_list, updated_at=NOW + timedelta(seconds=1))
    assert isinstance(changed.results, tuple)
    with pytest.raises(InvalidToolCallError):
        dataclasses.replace(call, checksum="nope")


def test_public_module() -> None:
    """ToolCall reports ``pipeline`` as its module."""
    assert ToolCall.__module__ == "pipeline.calls"


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(args=st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_frozen_args_equal_the_raw_args_and_keep_the_checksum(args: dict[str, Any]) -> None:
    """Stored args equal what was given, serialise the same, and re-checksum to the same value."""
    call = ToolCall.completed(id="c", tool="t", args=args, results="x")
    assert call.args == args
    assert json.dumps(call.args, sort_keys=True) == json.dumps(args, sort_keys=True)
    assert tool_call_checksum("t", call.args) == call.checksum
    text_call = ToolCall.completed(id="c", tool="t", args=json.dumps(args), results="x")
    assert text_call.checksum == call.checksum


def test_a_record_without_decisions_whose_handler_did_not_run_reads_not_run() -> None:
    """Nothing decided and nothing ran (an error record of your own): ``not_run``, never
    ``allowed``; the same record whose handler ran reads ``allowed``."""
    unrun = ToolCall.completed(id="c1", tool="t", args={}, results="Error: offline", is_error=True)
    assert (unrun.ran, unrun.decisions, unrun.verdict) == (False, (), "not_run")
    ran = ToolCall.completed(
        id="c2", tool="t", args={}, results="Error: boom", ran=True, is_error=True
    )
    assert ran.verdict == "allowed"
