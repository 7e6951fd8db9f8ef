"""Artifacts true to the seeds: the seeds' own examples, through the model's tools.

JSON queries read records (``json_type`` is the format; ``json_get`` returns every match and
``[]`` for none), a user's attachment is third-party content, a JSON or Markdown class with no
artifacts of its own still forges the base tools, and a handle lists only the query tools the
turn's registry offers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from middleware import ToolPolicy
from pipeline import ToolLoopExecutor, ToolRegistry, TurnRunner, tool
from pipeline.artifacts import (
    Media,
    SpooledArtifact,
    SpooledJsonArtifact,
    SpooledMarkdownArtifact,
    render_tool_result,
)
from pipeline.calls import ToolCall
from pipeline.errors import ToolDownstreamError
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stores import FileSpoolStore, MemorySpoolStore

THREE_RECORDS = (
    '{"id": 1, "role": "user"}\n{"id": 2, "role": "tool"}\n{"id": 3, "role": "user"}\n'
)


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


@pytest.fixture(params=["memory", "file"])
def json_of(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Return ``json_of(text)``: a JSON artifact over each store."""
    store = MemorySpoolStore() if request.param == "memory" else FileSpoolStore(tmp_path)
    return lambda text: SpooledJsonArtifact(store.write("a1", text))


async def ask(artifact: SpooledArtifact, name: str, **arguments: Any) -> str:
    """Call the forged tool ``name`` on ``artifact`` as the model would; return its text."""
    ctx = OneCall(ToolCall.completed(id="a1", tool="fetch", args={}, results=artifact))
    forged = type(artifact).forge_tools(ctx).get(name)
    assert forged is not None, name
    text = await forged.bind(ctx)({"call_id": "a1", **arguments})
    assert isinstance(text, str)
    return text


async def test_a_missing_key_reads_as_an_empty_list_not_an_error(json_of: Any) -> None:
    """The seeds' example: a JSON object with $.nonexistent gives []."""
    artifact = json_of('{"name": "ann", "tags": ["a"]}')
    assert artifact.json_get("$.nonexistent") == []
    assert await ask(artifact, "artifact_json_get", path="$.nonexistent") == "(empty list)"
    assert await ask(artifact, "artifact_json_pluck", path="$.nonexistent") == "(empty list)"


async def test_three_json_lines_records(json_of: Any) -> None:
    """The seeds' example: $.id is [1, 2, 3], slice(1, 3) is two records from id 2, and
    filter('$.role') is all three records."""
    artifact = json_of(THREE_RECORDS)
    assert artifact.json_type() == "jsonl"
    assert artifact.json_get("$.id") == [1, 2, 3]
    assert artifact.json_pluck("$.id") == [1, 2, 3]
    sliced = artifact.json_slice(1, 3)
    assert [record["id"] for record in sliced] == [2, 3]
    assert len(artifact.json_filter("$.role")) == 3
    assert artifact.json_filter("$.missing") == []
    assert artifact.json_length() == 3
    assert await ask(artifact, "artifact_json_get", path="$.id") == "[\n  1,\n  2,\n  3\n]"
    assert await ask(artifact, "artifact_json_type") == "jsonl"
    assert await ask(artifact, "artifact_json_length") == "3"


def test_commented_text_with_trailing_commas_is_json5(json_of: Any) -> None:
    """The seeds' example: comments and trailing commas make the body JSON5."""
    artifact = json_of("// settings\n{\n  retries: 3, /* max */\n  hosts: ['a', 'b',],\n}\n")
    assert artifact.json_type() == "json5"
    assert artifact.json_get("$.hosts[*]") == ["a", "b"]
    assert artifact.json_length() == 1


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('{"a": 1}\n', "json"),  # one line: strict JSON wins over JSON Lines
        ("[1,\n 2]", "json"),  # lines that do not parse alone, a whole that does
        ("1\n2\n", "jsonl"),
        ('{"a": 1}\n\n{"a": 2}', "jsonl"),  # blank lines do not count
        ("{a: 1}", "json5"),
    ],
)
def test_format_inference_follows_the_seeds_order(json_of: Any, text: str, fmt: str) -> None:
    """Strict JSON first, then JSON Lines (every non-blank line parses), then JSON5."""
    assert json_of(text).json_type() == fmt


@pytest.mark.parametrize("text", ["", "\n\n", "   "])
def test_empty_content_cannot_be_inferred_and_says_so(json_of: Any, text: str) -> None:
    """Nothing to infer from: the error says so instead of guessing a format."""
    with pytest.raises(ToolDownstreamError, match="cannot be inferred"):
        json_of(text).json_type()


def test_a_user_attachment_is_third_party_private_and_renders_untrusted() -> None:
    """As the seeds say: an attachment is not first-party, whatever tool returns it."""
    attachment = Media.user_attachment("document", "application/pdf", "cv.pdf", b"%PDF")
    assert attachment.trust_tier == "third-party-private"
    assert not attachment.trusted
    call = ToolCall.completed(id="m1", tool="inbox", args={}, results=attachment)
    trusting = ToolRegistry([inbox_tool(trusted=True)])
    text = render_tool_result(call, trusting).text
    assert text.startswith("<untrusted_content_")
    assert 'kind="media"' in text
    assert "trust tier third-party-private" in text


def inbox_tool(trusted: bool) -> Any:
    @tool(trusted=trusted)
    def inbox() -> str:
        """Read the inbox."""
        return ""

    return inbox


@pytest.mark.parametrize("cls", [SpooledJsonArtifact, SpooledMarkdownArtifact])
def test_a_class_without_its_own_artifacts_forges_the_base_tools(
    cls: type[SpooledArtifact],
) -> None:
    """A turn with only plain artifacts: the JSON or Markdown class still gives the base tools."""
    plain = SpooledArtifact(MemorySpoolStore().write("t1", "a\nb"))
    ctx = OneCall(ToolCall.completed(id="t1", tool="fetch", args={}, results=plain))
    names = [t.name for t in cls.forge_tools(ctx).all()]
    assert names == [m.name for m in SpooledArtifact.tool_methods]


class Watching:
    """A scripted model that renders the first call's result as it sees it, mid-turn."""

    def __init__(self, steps: list[ModelResponse]) -> None:
        self.steps = steps
        self.seen: list[str] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        assert request.tool_view is not None
        for call in request.tool_calls:
            self.seen.append(render_tool_result(call, request.tool_view).text)
        return self.steps.pop(0) if self.steps else ModelResponse(text="done")


@tool
def big() -> str:
    """A long result."""
    return "line\n" * 5_000


async def test_a_handle_lists_only_the_query_tools_the_turn_offers() -> None:
    """A policy that denied artifact_cat must not see it advertised in the handle."""
    model = Watching(
        [
            ModelResponse(tool_calls=[ProposedToolCall(id="b", name="big", arguments="{}")]),
            ModelResponse(text="done"),
        ]
    )
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[big],
        middleware=[ToolPolicy(deny=["artifact_cat"])],
    )
    result = await runner.run("go")
    assert result.status == "completed"
    handle = model.seen[-1]
    assert 'kind="artifact-handle"' in handle
    assert "artifact_head" in handle
    assert "artifact_grep" in handle
    assert "artifact_cat" not in handle


def test_a_hidden_or_foreign_tool_is_not_advertised() -> None:
    """Hidden tools and query tools for another artifact class are left out of the handle."""
    artifact = SpooledArtifact(MemorySpoolStore().write("t1", "a\n" * 100))
    call = ToolCall.completed(id="t1", tool="fetch", args={}, results=artifact)
    registry = ToolRegistry(SpooledArtifact.forge_tools(OneCall(call)).all())
    registry.hide("artifact_tail")
    text = render_tool_result(call, registry).text
    assert "artifact_head" in text
    assert "artifact_tail" not in text
    bare = render_tool_result(call, ToolRegistry()).text
    assert "No query tools for it are offered in this turn." in bare
    assert "artifact_head" not in bare


def test_the_documented_deviations_hold() -> None:
    """grep lines carry their 0-based index, and a handle carries a short preview."""
    artifact = SpooledArtifact(MemorySpoolStore().write("t1", "zero\none\ntwo\none again"))
    assert artifact.grep("one") == ["1:one", "3:one again"]
    call = ToolCall.completed(id="t1", tool="fetch", args={}, results=artifact)
    text = render_tool_result(call, ToolRegistry()).text
    assert "Preview (first 4 lines):\nzero\none\ntwo\none again" in text
    assert text.startswith("<untrusted_content_")
