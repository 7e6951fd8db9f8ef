"""SpooledJsonArtifact: format inference, JSONPath queries, and clear errors on bad content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.artifacts import SpooledArtifact, SpooledJsonArtifact
from pipeline.artifacts._json_artifact import JsonFormat
from pipeline.errors import InvalidToolArgsError, ToolDownstreamError
from pipeline.stores import FileSpoolStore, MemorySpoolStore

STORES = ["memory", "file"]
BOOKS = """{
  "store": {
    "book": [
      {"title": "A", "price": 8, "tags": ["x"]},
      {"title": "B", "price": 12},
      {"title": "C", "price": 22, "author": {"name": "Zed"}}
    ],
    "open": true
  }
}"""
RECORDS = '{"id": 1, "name": "ann"}\n\n{"id": 2, "age": 30}\n{"id": 3, "name": "cy"}\n'


@pytest.fixture(params=STORES, ids=STORES)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Return ``make(text, format=None)`` building a JSON artifact over each store."""
    store = MemorySpoolStore() if request.param == "memory" else FileSpoolStore(tmp_path)

    def build(text: str | bytes, format: JsonFormat | None = None) -> SpooledJsonArtifact:
        return SpooledJsonArtifact(store.write("c1", text), format=format)

    return build


@pytest.mark.parametrize(
    ("text", "fmt", "document"),
    [
        ('{"a": 1}', "json", {"a": 1}),
        ("[1, 2]\n", "json", [1, 2]),
        ('"just a string"', "json", "just a string"),
        ('{"a": 1}\n{"a": 2}\n', "jsonl", [{"a": 1}, {"a": 2}]),
        ("{a: 1, // comment\n b: [1, 2,],}", "json5", {"a": 1, "b": [1, 2]}),
        ("{'single': 'quotes'}", "json5", {"single": "quotes"}),
    ],
    ids=["object", "array", "string", "jsonl", "json5-multiline", "json5-one-line"],
)
def test_format_is_inferred(make: Any, text: str, fmt: str, document: Any) -> None:
    """Without a format: whole-body JSON, else JSON Lines, else JSON5."""
    artifact = make(text)
    assert artifact.format == fmt
    assert artifact.document() == document


@pytest.mark.parametrize("fmt", ["jsonl", "ndjson"])
def test_json_lines_are_records_and_blank_lines_are_skipped(make: Any, fmt: JsonFormat) -> None:
    """Every query reads the records of JSON Lines; blank lines are skipped."""
    artifact = make(RECORDS, fmt)
    assert artifact.format == fmt
    assert artifact.json_type() == fmt  # the format, ndjson only because it was given
    assert artifact.json_root_type() == "array"
    assert artifact.json_length() == 3
    assert artifact.json_keys() == ["id", "name", "age"]
    assert artifact.json_get("$.name") == ["ann", "cy"]  # flattened across records
    assert artifact.json_pluck("$.name") == ["ann", "cy"]
    assert artifact.json_slice(-2) == [{"id": 2, "age": 30}, {"id": 3, "name": "cy"}]
    assert artifact.json_filter("$.age") == [{"id": 2, "age": 30}]


def test_json_queries(make: Any) -> None:
    """type, keys, length, get, filter, pluck and slice answer over one JSON document."""
    artifact = make(BOOKS)
    assert artifact.json_type() == "json"
    assert artifact.json_root_type() == "object"
    assert artifact.json_keys() == ["store"]
    assert artifact.json_length() == 1  # one record: the document
    assert artifact.json_get("$.store.book[1].title") == ["B"]
    assert artifact.json_get("$.store.open") == [True]
    assert artifact.json_get("$.store.book[?(@.price > 10)].title") == ["B", "C"]
    assert artifact.json_get("$..name") == ["Zed"]
    assert artifact.json_get("$.nothing") == []
    assert artifact.json_get("$.store.book.`len`") == [3]
    root = artifact.document()
    assert artifact.json_filter("$.store.open") == [root]
    assert artifact.json_filter("$.nothing") == []
    assert artifact.json_slice() == [root]
    assert artifact.json_slice(1, 3) == [root]  # a single document gives [root]


def test_pluck_is_get_and_keys_of_an_array_root(make: Any) -> None:
    """json_pluck is json_get (every match in the document); keys union an array's objects."""
    artifact = make('[{"a": {"b": 1}}, {"a": {"b": 2}}, {"c": 3}, 4]')
    assert artifact.json_pluck("$[*].a.b") == [1, 2]
    assert artifact.json_pluck("$[*].a.b") == artifact.json_get("$[*].a.b")
    assert artifact.json_pluck("$.missing") == []
    assert artifact.json_keys() == ["a", "c"]
    assert artifact.json_length() == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", "number"), ("1.5", "number"), ("true", "boolean"), ("null", "null"),
     ('"s"', "string"), ("[]", "array"), ("{}", "object")],
    ids=["int", "float", "bool", "null", "string", "array", "object"],
)
def test_json_root_type_names(make: Any, text: str, expected: str) -> None:
    """json_root_type uses the JSON type names; json_type stays the format."""
    assert make(text).json_root_type() == expected
    assert make(text).json_type() == "json"


@pytest.mark.parametrize(
    ("text", "fmt", "line", "needle"),
    [
        ('{"a": 1}\n{"a": 2,\n{"a": 3}', "jsonl", 1, "not valid jsonl at line 1"),
        ('{"a": 1}\n{"a": 2}\nnot json', None, 2, "not valid jsonl at line 2"),
        ('{\n  "a": 1,\n  "b": ,\n}', "json", 2, "not valid json at line 2"),
        ('{\n  "a": 1,\n  "b": ,\n}', None, 2, "not valid json at line 2"),
        ("{a: 1,\n b: ]}", "json5", 1, "not valid json5 at line 1"),
        ("[" * 100_000 + "]" * 100_000, None, None, "not valid json"),
    ],
    ids=["jsonl-explicit", "jsonl-inferred", "json-explicit", "json-inferred", "json5",
         "too-deep"],
)
def test_malformed_content_names_the_line(
    make: Any, text: str, fmt: JsonFormat | None, line: int | None, needle: str
) -> None:
    """Content that does not parse raises ToolDownstreamError naming the 0-based line."""
    artifact = make(text, fmt)
    with pytest.raises(ToolDownstreamError, match=needle) as info:
        artifact.json_keys()
    assert info.value.code == "E_TOOL_DOWNSTREAM_ERROR"
    assert info.value.line == line


@pytest.mark.parametrize("text", ["", " \n "], ids=["empty", "blank"])
def test_empty_body_cannot_be_inferred_and_says_so(make: Any, text: str) -> None:
    """An empty body is not JSON of any format: inferring it is an error naming the cause."""
    with pytest.raises(ToolDownstreamError, match=r"empty: its JSON format .* cannot be inferred"):
        make(text).json_type()


@pytest.mark.parametrize("path", ["$[?(@.x ==", "$..[", "", "   "],
                         ids=["open-filter", "open-bracket", "empty", "blank"])
def test_invalid_paths_are_argument_errors(make: Any, path: str) -> None:
    """A JSONPath that does not parse raises InvalidToolArgsError."""
    with pytest.raises(InvalidToolArgsError) as info:
        make(BOOKS).json_filter(path)
    assert info.value.code == "E_INVALID_TOOL_ARGS"


@pytest.mark.parametrize(
    ("text", "call", "needle"),
    [
        ("5", lambda a: a.json_keys(), "json_keys needs an object or an array"),
        ("[1]", lambda a: a.json_slice("0", None), "start must be an integer"),
    ],
    ids=["keys-of-number", "slice-str-bound"],
)
def test_queries_that_do_not_fit_the_document(make: Any, text: str, call: Any,
                                              needle: str) -> None:
    """A query that does not fit the document's shape is a readable argument error."""
    with pytest.raises(InvalidToolArgsError, match=needle):
        call(make(text))


@pytest.mark.parametrize(
    ("text", "call", "expected"),
    [
        ("true", lambda a: a.json_length(), 1),
        ("{}", lambda a: a.json_pluck("x"), []),
        ('"s"', lambda a: a.json_slice(0, 1), ["s"]),
        ("{}", lambda a: a.json_get("$.missing"), []),
    ],
    ids=["length-of-bool", "pluck-object", "slice-string", "get-missing"],
)
def test_record_queries_fit_any_document(make: Any, text: str, call: Any,
                                         expected: Any) -> None:
    """A single document is one record: length 1, slice [root], no match is []."""
    assert call(make(text)) == expected


def test_explicit_format_is_not_second_guessed(make: Any) -> None:
    """A JSON Lines body declared as json fails as json at its second record (line 2)."""
    with pytest.raises(ToolDownstreamError, match="not valid json at line 2"):
        make(RECORDS, "json").json_keys()


def test_unknown_format_is_rejected() -> None:
    """An unknown format name raises InvalidToolArgsError at construction."""
    with pytest.raises(InvalidToolArgsError, match="unknown JSON format"):
        SpooledJsonArtifact(MemorySpoolStore().write("c", "{}"), format="yaml")  # type: ignore[arg-type]


def test_unhashable_format_is_rejected_like_any_unknown_one() -> None:
    """A list as format raises InvalidToolArgsError, not a TypeError from a set lookup."""
    with pytest.raises(InvalidToolArgsError, match="unknown JSON format"):
        SpooledJsonArtifact(MemorySpoolStore().write("c", "{}"), format=["json"])  # type: ignore[arg-type]


def test_class_level_format_for_artifact_constructors() -> None:
    """A subclass fixing json_format makes every instance use it."""

    class Ndjson(SpooledJsonArtifact):
        json_format = "ndjson"

    artifact = Ndjson(MemorySpoolStore().write("c", '{"a": 1}'))
    assert artifact.format == "ndjson"
    assert artifact.document() == [{"a": 1}]
    assert isinstance(artifact, SpooledArtifact)
    assert repr(artifact) == "<Ndjson ndjson 8 bytes, 1 lines>"


def test_document_is_parsed_once(make: Any) -> None:
    """The parsed document is cached: repeated queries return the same object."""
    artifact = make(BOOKS)
    assert artifact.document() is artifact.document()


def test_json_format_literal_is_public() -> None:
    """JsonFormat is exported and lists the formats a SpooledJsonArtifact accepts."""
    from typing import get_args

    from pipeline.artifacts import JsonFormat

    assert get_args(JsonFormat) == ("json", "jsonl", "ndjson", "json5")
