"""The result size cap: no query tool returns more than ``max_result_bytes``, and a
capped result says exactly how to read the rest; following that advice reads everything, once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.artifacts import (
    SpooledArtifact,
    SpooledJsonArtifact,
    SpooledMarkdownArtifact,
    ToolMethod,
)
from pipeline.artifacts._args import NoArgs
from pipeline.artifacts._toolmethod import default_serialise
from pipeline.calls import ToolCall
from pipeline.stores import FileSpoolStore, MemorySpoolStore

CAP = 2048
NOTE = re.compile(r"\n?\[output capped at [\d,]+ bytes: [^\n]*\]$")


class Small(SpooledArtifact):
    max_result_bytes = CAP


class SmallJson(SpooledJsonArtifact):
    max_result_bytes = CAP


class SmallMarkdown(SpooledMarkdownArtifact):
    max_result_bytes = CAP


class OneCall:
    """What forging and forged handlers use, over one stored call."""

    turn_id = "turn-1"

    def __init__(self, call: ToolCall) -> None:
        self.call = call

    def emit(self, event: object) -> None:
        pass

    def artifact_call_ids(self, cls: type[SpooledArtifact]) -> list[str]:
        return [self.call.id] if isinstance(self.call.results, cls) else []

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        return self.call if call_id == self.call.id else None


async def ask(artifact: SpooledArtifact, name: str, **arguments: Any) -> str:
    """Call forged tool ``name`` on ``artifact``; check the result is within the cap."""
    ctx = OneCall(ToolCall.completed(id="a1", tool="fetch", args={}, results=artifact))
    forged = type(artifact).forge_tools(ctx).get(name)
    assert forged is not None, name
    text = await forged.bind(ctx)({"call_id": "a1", **arguments})
    assert isinstance(text, str)
    assert len(text.encode("utf-8")) <= type(artifact).max_result_bytes, (name, len(text))
    return text


def split_note(text: str) -> tuple[str, str | None]:
    """Return the result's body and its cap note (None when it was not capped)."""
    found = NOTE.search(text)
    if found is None:
        return text, None
    return text[: found.start()], found.group().strip()


def lines_of(i: int) -> str:
    return f"{i:05d} " + ("é" if i % 7 == 0 else "x") * (i % 90)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return MemorySpoolStore() if request.param == "memory" else FileSpoolStore(tmp_path)


BODY = "\n".join(lines_of(i) for i in range(3000))


async def test_following_cat_advice_reads_the_whole_body_once(store: Any) -> None:
    """Each capped cat names the next range; walking it gives every line, in order, once."""
    artifact = Small(store.write("a1", BODY))
    read: list[str] = []
    arguments: dict[str, Any] = {}
    calls = 0
    while True:
        calls += 1
        body, note = split_note(await ask(artifact, "artifact_cat", **arguments))
        read.extend(body.split("\n"))
        if note is None:
            break
        start = re.search(r"artifact_cat\(start=(\d+)\)", note)
        assert start is not None, note
        arguments = {"start": int(start.group(1))}
    assert read == BODY.split("\n")
    assert calls > 10


async def test_head_and_tail_point_at_the_lines_they_left_out(store: Any) -> None:
    """head shows the first lines that fit, tail the last; each names the range it left out."""
    artifact = Small(store.write("a1", BODY))
    head, note = split_note(await ask(artifact, "artifact_head", n=1000))
    shown = head.split("\n")
    assert shown == BODY.split("\n")[: len(shown)]
    assert note is not None
    assert f"artifact_cat(start={len(shown)}, end=1000)" in note
    tail, note = split_note(await ask(artifact, "artifact_tail", n=1000))
    kept = tail.split("\n")
    assert kept == BODY.split("\n")[-len(kept):]
    assert note is not None
    assert f"artifact_cat(start=2000, end={3000 - len(kept)})" in note


async def test_following_grep_advice_finds_every_match_once(store: Any) -> None:
    """A capped grep names the line to go on from; the walk equals the uncapped grep."""
    artifact = Small(store.write("a1", BODY))
    found: list[str] = []
    arguments: dict[str, Any] = {"pattern": r"^\d+5 x"}
    while True:
        body, note = split_note(await ask(artifact, "artifact_grep", **arguments))
        found.extend(line for line in body.split("\n") if line != "(empty list)")
        if note is None:
            break
        start = re.search(r"start_line=(\d+)", note)
        assert start is not None, note
        arguments["start_line"] = int(start.group(1))
    assert found == artifact.grep(r"^\d+5 x")
    assert len(found) > 100


async def test_following_json_offsets_and_starts_reads_every_record(store: Any) -> None:
    """json_get pages by offset and json_slice by start; both walks equal the whole answer."""
    records = [{"id": i, "name": "n" * (i % 50)} for i in range(600)]
    artifact = SmallJson(store.write("a1", "\n".join(json.dumps(r) for r in records)))
    got: list[Any] = []
    offset = 0
    while True:
        body, note = split_note(await ask(artifact, "artifact_json_get", path="$.name",
                                          offset=offset))
        got.extend(body.split("\n"))
        if note is None:
            break
        found = re.search(r"offset=(\d+)\)", note)
        assert found is not None, note
        offset = int(found.group(1))
    assert got == artifact.json_get("$.name")
    sliced: list[Any] = []
    start = 0
    while True:
        body, note = split_note(await ask(artifact, "artifact_json_slice", start=start))
        sliced.extend(json.loads(body))
        if note is None:
            break
        found = re.search(r"artifact_json_slice\(start=(\d+)\)", note)
        assert found is not None, note
        start = int(found.group(1))
    assert sliced == records


async def test_an_answer_that_fits_is_exactly_the_methods_serialised_result(store: Any) -> None:
    """Under the cap nothing changes: the text is default_serialise of the method's value."""
    artifact = SmallJson(store.write("a1", '{"a": [1, 2], "b": {"c": "d"}}'))
    for path in ("$.a", "$.b", "$.a[*]", "$.b.c", "$.none"):
        expected = default_serialise(artifact.json_get(path))
        assert await ask(artifact, "artifact_json_get", path=path) == expected
    plain = Small(store.write("a2", "one\ntwo\nthree"))
    assert await ask(plain, "artifact_cat", start=1) == "two\nthree"
    assert await ask(plain, "artifact_tail", n=2) == "two\nthree"
    assert await ask(plain, "artifact_grep", pattern="t") == "1:two\n2:three"


async def test_one_line_longer_than_the_cap_is_cut_and_skipped(store: Any) -> None:
    """A single huge line is shown in part; the advice moves past it."""
    artifact = Small(store.write("a1", "short\n" + "é" * 10_000 + "\nafter"))
    body, note = split_note(await ask(artifact, "artifact_cat", start=1))
    assert body
    assert set(body) == {"é"}
    assert note is not None
    assert "line 1 alone is 20,000 bytes" in note
    assert "artifact_cat(start=2)" in note


async def test_markdown_text_pages_by_start_line(store: Any) -> None:
    """md_text stops at a whole block and names the next block's line."""
    text = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(60))
    artifact = SmallMarkdown(store.write("a1", text))
    blocks: list[str] = []
    start = 0
    while True:
        body, note = split_note(await ask(artifact, "artifact_md_text", start_line=start))
        blocks.extend(body.split("\n\n"))
        if note is None:
            break
        found = re.search(r"start_line=(\d+)\)", note)
        assert found is not None, note
        start = int(found.group(1))
    assert blocks == [block for _, block in artifact.md_blocks()]


async def test_a_custom_tool_method_is_cut_to_the_cap_too(store: Any) -> None:
    """A method without a capped renderer is cut afterwards, with a note."""

    class Shouting(Small):
        tool_methods = (
            ToolMethod("artifact_shout", lambda a: a.as_string().upper(), "Shout.", NoArgs),
        )

    artifact = Shouting(store.write("a1", BODY))
    body, note = split_note(await ask(artifact, "artifact_shout"))
    assert BODY.upper().startswith(body)
    assert note is not None
    assert "of 1" in note


def test_the_default_cap_is_32_kib() -> None:
    """The default is well under a typical context."""
    assert SpooledArtifact.max_result_bytes == 32 * 1024
    assert SpooledJsonArtifact.max_result_bytes == 32 * 1024


@settings(max_examples=40, deadline=None)
@given(
    lines=st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=300),
                   min_size=1, max_size=60),
    start=st.integers(min_value=0, max_value=70),
)
async def test_any_body_any_range_stays_within_the_cap(lines: list[str], start: int) -> None:
    """Whatever the text (multi-byte, long lines), cat, head, tail and grep fit the cap."""
    artifact = Small(MemorySpoolStore().write("a1", "\n".join(lines)))
    for name, arguments in (
        ("artifact_cat", {"start": start}),
        ("artifact_head", {"n": start + 5}),
        ("artifact_tail", {"n": start + 5}),
        ("artifact_grep", {"pattern": "."}),
    ):
        await ask(artifact, name, **arguments)


async def test_an_item_larger_than_the_cap_is_cut_and_the_advice_moves_past_it(
    store: Any,
) -> None:
    """A single match bigger than the cap is shown in part; the next offset skips it."""
    records = [{"id": i, "pad": "p" * 5000} for i in range(3)]
    artifact = SmallJson(store.write("a1", "\n".join(json.dumps(r) for r in records)))
    body, note = split_note(await ask(artifact, "artifact_json_get", path="$.pad"))
    assert body.startswith('"ppp')  # the item as JSON, cut
    assert set(body) == {'"', "p"}
    assert note is not None
    assert "the first item alone is" in note
    assert 'artifact_json_get(path="$.pad", offset=1)' in note
    body, note = split_note(await ask(artifact, "artifact_json_get", path="$.pad", offset=1))
    assert note is not None
    assert 'offset=2)' in note
