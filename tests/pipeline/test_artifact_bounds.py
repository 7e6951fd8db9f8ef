"""Parse bounds: JSON Lines past ``json_max_bytes`` stream record by record, while a
whole JSON document or Markdown past its bound is refused with advice, never parsed whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.artifacts import SpooledJsonArtifact, SpooledMarkdownArtifact
from pipeline.errors import ToolDownstreamError
from pipeline.stores import FileSpoolStore, MemorySpoolStore


class Bounded(SpooledJsonArtifact):
    json_max_bytes = 200


class BoundedMarkdown(SpooledMarkdownArtifact):
    md_max_bytes = 100


RECORDS = [{"id": i, "tag": "even" if i % 2 == 0 else "odd"} for i in range(40)]
LINES = "\n".join(json.dumps(r) for r in RECORDS) + "\n"


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return MemorySpoolStore() if request.param == "memory" else FileSpoolStore(tmp_path)


def test_json_lines_past_the_bound_are_streamed_by_every_query(store: Any) -> None:
    """The format is inferred from the first line; queries stream, never hold the list."""
    artifact = Bounded(store.write("a1", LINES))
    assert artifact.byte_length() > Bounded.json_max_bytes
    assert artifact.json_type() == "jsonl"
    assert artifact.json_length() == 40
    assert artifact.json_get("$.id")[:3] == [0, 1, 2]
    assert len(artifact.json_filter("$.tag")) == 40
    assert artifact.json_slice(-2) == RECORDS[-2:]
    assert artifact.json_keys() == ["id", "tag"]
    assert artifact.json_root_type() == "array"
    with pytest.raises(ToolDownstreamError, match="too large to hold as a list of records"):
        artifact.document()


def test_a_bad_record_past_the_bound_is_named_by_the_query_that_reads_it(store: Any) -> None:
    """Inference reads the first line only; the bad line is reported with its index."""
    artifact = Bounded(store.write("a1", LINES + "{oops\n"))
    assert artifact.json_type() == "jsonl"
    with pytest.raises(ToolDownstreamError, match="not valid jsonl at line 40") as info:
        artifact.json_length()
    assert info.value.line == 40


@pytest.mark.parametrize("fmt", [None, "json"])
def test_a_whole_document_past_the_bound_is_refused_with_advice(
    store: Any, fmt: Any
) -> None:
    """One pretty-printed document too large to parse: the error points at grep and cat."""
    body = json.dumps({"records": RECORDS}, indent=2)
    artifact = Bounded(store.write("a1", body), format=fmt)
    refused = "too large to parse as one JSON document"
    with pytest.raises(ToolDownstreamError, match=refused) as info:
        artifact.json_get("$.records[0]")
    assert "artifact_grep" in info.value.message


def test_markdown_past_its_bound_is_refused_with_advice(store: Any) -> None:
    """No markdown-it parse of a body past md_max_bytes; base queries still work."""
    body = "\n\n".join(f"# Title {i}\n\nText {i}." for i in range(20))
    artifact = BoundedMarkdown(store.write("a1", body))
    with pytest.raises(ToolDownstreamError, match="too large to parse as Markdown") as info:
        artifact.md_headings()
    assert "artifact_grep" in info.value.message
    assert artifact.grep("^# Title 1$") == ["4:# Title 1"]
