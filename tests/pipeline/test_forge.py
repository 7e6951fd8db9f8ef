"""Forging artifact query tools: call_id enums, validation before handlers, vanished ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import ToolLoopExecutor, TurnRunner
from pipeline import tool as tool_from_function
from pipeline.artifacts import (
    ArtifactTool,
    SpooledArtifact,
    SpooledJsonArtifact,
    SpooledMarkdownArtifact,
    ToolMethod,
)
from pipeline.artifacts._args import NoArgs
from pipeline.artifacts._toolmethod import default_serialise
from pipeline.calls import ToolCall
from pipeline.errors import InvalidToolArgsError, InvalidToolError
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import FileSpoolStore, MemorySpoolStore
from pipeline.testing import ScriptedModel


class FakeContext:
    """The four things forging and forged tools use: turn_id, emit, the two lookups."""

    turn_id = "turn-1"

    def __init__(self, *calls: ToolCall) -> None:
        self.calls = {call.id: call for call in calls}
        self.events: list[object] = []
        self.lookups: list[str] = []

    def emit(self, event: object) -> None:
        self.events.append(event)

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        self.lookups.append(call_id)
        return self.calls.get(call_id)

    def artifact_call_ids(self, cls: type) -> list[str]:
        return [
            cid for cid, call in self.calls.items()
            if isinstance(call.results, cls) and not call.from_artifact_tool and not call.inline
        ]


STORE = MemorySpoolStore()


def call(call_id: str, results: Any, **options: Any) -> ToolCall:
    return ToolCall.completed(id=call_id, tool="fetch", args={"n": call_id}, results=results,
                              **options)


def text_call(call_id: str, text: str = "one\ntwo\nthree") -> ToolCall:
    return call(call_id, SpooledArtifact(STORE.write(call_id, text)))


def json_call(call_id: str, text: str = '{"items": [1, 2, 3]}') -> ToolCall:
    return call(call_id, SpooledJsonArtifact(STORE.write(call_id, text)))


def md_call(call_id: str, text: str = "# Title\n\nbody\n") -> ToolCall:
    return call(call_id, SpooledMarkdownArtifact(STORE.write(call_id, text)))


def enum_of(tool: Any) -> list[str]:
    return list(tool.describe()["input_schema"]["properties"]["call_id"]["enum"])


@pytest.fixture
def ctx() -> FakeContext:
    """A turn with two plain artifacts, two JSON ones, one Markdown one and non-eligible calls."""
    return FakeContext(
        text_call("t1"),
        json_call("j1"),
        text_call("t2"),
        json_call("j2", "[1, 2]"),
        md_call("m1"),
        call("inline", SpooledArtifact(STORE.write("inline", "x")), inline=True),
        call("plain", "just text"),
        call("q1", "from a query", from_artifact_tool=True),
    )


def test_no_artifacts_forge_an_empty_registry() -> None:
    """A turn without artifacts of the class or its bases forges nothing."""
    assert len(SpooledArtifact.forge_tools(FakeContext(call("p", "text")))) == 0
    assert len(SpooledJsonArtifact.forge_tools(FakeContext(call("p", "text")))) == 0


def test_a_subclass_without_artifacts_of_its_own_still_forges_the_base_tools() -> None:
    """As the seeds do: the base tools for the turn's base artifacts, none of the JSON ones."""
    only_text = FakeContext(text_call("t1"))
    registry = SpooledJsonArtifact.forge_tools(only_text)
    assert [t.name for t in registry.all()] == [m.name for m in SpooledArtifact.tool_methods]
    for tool in registry.all():
        assert enum_of(tool) == ["t1"]
    assert registry.get("artifact_json_get") is None
    assert [t.name for t in SpooledMarkdownArtifact.forge_tools(only_text).all()] == [
        m.name for m in SpooledArtifact.tool_methods
    ]


def test_base_tools_list_every_artifact_in_storage_order(ctx: FakeContext) -> None:
    """The base tools' call_id enum lists every eligible artifact, subclasses included."""
    registry = SpooledArtifact.forge_tools(ctx)
    assert [t.name for t in registry.all()] == [m.name for m in SpooledArtifact.tool_methods]
    for tool in registry.all():
        assert enum_of(tool) == ["t1", "j1", "t2", "j2", "m1"]
        schema = tool.describe()["input_schema"]
        assert "call_id" in schema["required"]


def test_subclass_tools_list_only_their_class(ctx: FakeContext) -> None:
    """JSON tools list JSON artifacts only; the base tools forged with them list all."""
    registry = SpooledJsonArtifact.forge_tools(ctx)
    names = [t.name for t in registry.all()]
    assert names == [m.name for m in SpooledJsonArtifact.all_tool_methods()]
    head = registry.get("artifact_head")
    json_get = registry.get("artifact_json_get")
    assert head is not None
    assert json_get is not None
    assert enum_of(head) == ["t1", "j1", "t2", "j2", "m1"]
    assert enum_of(json_get) == ["j1", "j2"]
    md = SpooledMarkdownArtifact.forge_tools(ctx).get("artifact_md_headings")
    assert md is not None
    assert enum_of(md) == ["m1"]


def test_a_single_id_is_still_an_enum() -> None:
    """With one eligible artifact the schema still says enum (not const)."""
    tool = SpooledArtifact.forge_tools(FakeContext(text_call("only"))).get("artifact_tail")
    assert tool is not None
    prop = tool.describe()["input_schema"]["properties"]["call_id"]
    assert prop["enum"] == ["only"]
    assert "const" not in prop


def test_forged_tools_are_ephemeral_replaceable_untrusted_artifact_tools(
    ctx: FakeContext,
) -> None:
    """Every forged tool is an ephemeral, replaceable, untrusted ArtifactTool."""
    for tool in SpooledMarkdownArtifact.forge_tools(ctx).all():
        assert isinstance(tool, ArtifactTool)
        assert tool.ephemeral is True
        assert tool.on_collision == "replace"
        assert tool.trusted is False


async def test_query_runs_the_method_and_serialises(ctx: FakeContext) -> None:
    """A forged tool looks the call up and returns the method's serialised result."""
    registry = SpooledJsonArtifact.forge_tools(ctx)
    head = registry.get("artifact_head")
    json_get = registry.get("artifact_json_get")
    count = registry.get("artifact_line_count")
    assert head is not None
    assert json_get is not None
    assert count is not None
    assert await head.bind(ctx)({"call_id": "t1", "n": 2}) == "one\ntwo"
    got = await json_get.bind(ctx)({"call_id": "j1", "path": "$.items"})
    assert got == "[\n  [\n    1,\n    2,\n    3\n  ]\n]"  # every match, as a list
    assert await count.bind(ctx)({"call_id": "j2"}) == "1"
    assert ctx.lookups == ["t1", "j1", "j2"]


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("artifact_head", {"call_id": "made-up"}),
        ("artifact_head", {"call_id": "inline"}),
        ("artifact_head", {"call_id": "q1"}),
        ("artifact_json_get", {"call_id": "t1", "path": "$"}),
        ("artifact_head", {}),
        ("artifact_head", {"call_id": "t1", "extra": 1}),
        ("artifact_grep", {"call_id": "t1", "pattern": "("}),
        ("artifact_grep", {"call_id": "t1", "pattern": "a", "flags": "q"}),
        ("artifact_head", {"call_id": "t1", "n": -1}),
        ("artifact_head", {"call_id": "t1", "n": "2"}),
        ("artifact_json_get", {"call_id": "j1", "path": "$[?(@.x =="}),
    ],
    ids=["made-up-id", "inline-id", "query-call-id", "other-class-id", "missing-id",
         "unknown-key", "bad-regex", "bad-flag", "negative-n", "string-n", "bad-jsonpath"],
)
async def test_bad_arguments_are_rejected_before_the_handler(
    ctx: FakeContext, tool_name: str, args: dict[str, Any]
) -> None:
    """Ineligible ids and bad method arguments fail validation; the handler never runs."""
    tool = SpooledJsonArtifact.forge_tools(ctx).get(tool_name)
    assert tool is not None
    with pytest.raises(InvalidToolArgsError) as info:
        await tool.bind(ctx)(args)
    assert info.value.code == "E_INVALID_TOOL_ARGS"
    assert ctx.lookups == []
    assert ctx.events == []


async def test_vanished_id_returns_the_documented_text(ctx: FakeContext) -> None:
    """An id that was valid when forged but is gone now gives a readable text result."""
    tool = SpooledArtifact.forge_tools(ctx).get("artifact_head")
    assert tool is not None
    del ctx.calls["t2"]
    got = await tool.bind(ctx)({"call_id": "t2"})
    assert got == "Error: no artifact with id t2 in this turn"


async def test_replaced_result_counts_as_vanished(ctx: FakeContext) -> None:
    """A call whose result is no longer an artifact of the tool's class is not queried."""
    tool = SpooledJsonArtifact.forge_tools(ctx).get("artifact_json_keys")
    assert tool is not None
    ctx.calls["j1"] = text_call("j1")
    got = await tool.bind(ctx)({"call_id": "j1"})
    assert got == "Error: no artifact with id j1 in this turn"


async def test_content_errors_surface_as_loop_errors(ctx: FakeContext) -> None:
    """A malformed JSON artifact makes its query raise a typed error naming the line."""
    broken = FakeContext(json_call("bad", '{"a": 1}\n{"a": '))
    tool = SpooledJsonArtifact.forge_tools(broken).get("artifact_json_keys")
    assert tool is not None
    with pytest.raises(Exception, match="not valid jsonl at line 1") as info:
        await tool.bind(broken)({"call_id": "bad"})
    assert info.value.code == "E_TOOL_DOWNSTREAM_ERROR"  # type: ignore[attr-defined]


def test_forging_is_cached_per_id_set(ctx: FakeContext) -> None:
    """Forging twice with the same ids reuses the same tool objects; new ids build new ones."""
    first = SpooledArtifact.forge_tools(ctx).get("artifact_cat")
    again = SpooledArtifact.forge_tools(ctx).get("artifact_cat")
    assert first is again
    ctx.calls["t3"] = text_call("t3")
    grown = SpooledArtifact.forge_tools(ctx).get("artifact_cat")
    assert grown is not first
    assert grown is not None
    assert enum_of(grown)[-1] == "t3"


async def test_large_file_artifacts_are_queried_correctly(tmp_path: Path) -> None:
    """A body above the thread threshold is queried (in a worker thread) with the same result."""
    store = FileSpoolStore(tmp_path)
    reader = store.write_chunks("big", (f"line {i}\n" for i in range(200_000)))
    assert reader.byte_length() > 1 << 20
    context = FakeContext(call("big", SpooledArtifact(reader)))
    registry = SpooledArtifact.forge_tools(context)
    tail = registry.get("artifact_tail")
    grep = registry.get("artifact_grep")
    assert tail is not None
    assert grep is not None
    assert await tail.bind(context)({"call_id": "big", "n": 2}) == "line 199999\n"
    assert await grep.bind(context)({"call_id": "big", "pattern": "^line 12345$"}) == (
        "12345:line 12345"
    )


async def test_custom_subclass_methods_are_forged() -> None:
    """A user subclass's own ToolMethod (a callable) becomes a tool over its instances."""

    def shout(artifact: SpooledArtifact) -> str:
        return artifact.as_string().upper()

    class Loud(SpooledArtifact):
        tool_methods = (ToolMethod(name="artifact_shout", method=shout,
                                   description="Upper-case the body.", args_schema=NoArgs),)

    context = FakeContext(call("l1", Loud(STORE.write("l1", "hey"))), text_call("t9"))
    registry = Loud.forge_tools(context)
    shout_tool = registry.get("artifact_shout")
    head = registry.get("artifact_head")
    assert shout_tool is not None
    assert head is not None
    assert enum_of(shout_tool) == ["l1"]
    assert enum_of(head) == ["l1", "t9"]
    assert await shout_tool.bind(context)({"call_id": "l1"}) == "HEY"


@pytest.mark.parametrize(
    ("tool_name", "args", "expected"),
    [
        ("artifact_grep", {"call_id": "t1", "pattern": "^T", "flags": "iu"}, "1:two\n2:three"),
        ("artifact_estimate_tokens", {"call_id": "t1", "encoding": "claude"}, None),
        ("artifact_estimate_tokens", {"call_id": "t1", "encoding": "llama2"}, None),
        ("artifact_md_links", {"call_id": "m2", "start_line": 2, "end_line": 3}, "[\n  {\n"
         '    "text": "b",\n    "url": "b.test",\n    "title": null\n  }\n]'),
        ("artifact_md_images", {"call_id": "m2", "start_line": 3}, "(empty list)"),
        ("artifact_md_text", {"call_id": "m2", "end_line": 1}, "[a](a.test)"),
        ("artifact_md_text", {"call_id": "m2", "start_line": 2}, "b"),
        ("artifact_md_ast", {"call_id": "m2", "start_line": 5}, '{\n  "type": "root",\n'
         '  "children": []\n}'),
    ],
    ids=["grep-u-flag", "tokens-claude", "tokens-llama2", "md-links-range", "md-images-range",
         "md-text-end", "md-text-start", "md-ast-range"],
)
async def test_forged_tools_take_the_seeds_arguments(
    tool_name: str, args: dict[str, Any], expected: str | None
) -> None:
    """The seeds' arguments pass validation: grep's u flag, model family encodings, md ranges."""
    context = FakeContext(
        call("t1", SpooledArtifact(STORE.write("t1x", "one\ntwo\nthree"))),
        md_call("m2", "\\[a](a.test)\n\n[b](b.test)\n"),
    )
    tool = SpooledMarkdownArtifact.forge_tools(context).get(tool_name)
    assert tool is not None
    got = await tool.bind(context)(args)
    if expected is None:
        assert int(str(got)) > 0
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("artifact_md_links", {"call_id": "m1", "start_line": -1}),
        ("artifact_md_text", {"call_id": "m1", "end_line": "2"}),
        ("artifact_estimate_tokens", {"call_id": "t1", "encoding": "gpt-9000"}),
        ("artifact_grep", {"call_id": "t1", "pattern": "a", "flags": "x"}),
    ],
    ids=["negative-start", "string-end", "unknown-encoding", "unknown-flag"],
)
async def test_seed_arguments_are_still_validated(
    ctx: FakeContext, tool_name: str, args: dict[str, Any]
) -> None:
    """Bad line ranges, encodings and flags fail validation before the handler runs."""
    tool = SpooledMarkdownArtifact.forge_tools(ctx).get(tool_name)
    assert tool is not None
    with pytest.raises(InvalidToolArgsError):
        await tool.bind(ctx)(args)
    assert ctx.lookups == []


def test_artifact_tool_refuses_an_artifact_constructor() -> None:
    """Passing artifact_constructor to an ArtifactTool raises InvalidToolError naming it."""
    with pytest.raises(InvalidToolError) as info:
        ArtifactTool(name="q", description="d", input_schema=NoArgs,
                     handler=lambda args, ctx, meta: "",
                     artifact_constructor=lambda: SpooledArtifact)
    assert info.value.code == "E_INVALID_INITIAL_TOOL_VALUE"
    assert info.value.field == "artifact_constructor"


def test_artifact_tool_defaults_and_queries_check() -> None:
    """A hand-built ArtifactTool defaults to the forged flags; queries must be an artifact class."""
    tool = ArtifactTool(name="q", description="d", input_schema=NoArgs,
                        handler=lambda args, ctx, meta: "")
    assert (tool.ephemeral, tool.on_collision, tool.trusted) == (True, "replace", False)
    assert tool.queries is SpooledArtifact
    with pytest.raises(InvalidToolError, match="queries"):
        ArtifactTool(name="q", description="d", input_schema=NoArgs,
                     handler=lambda args, ctx, meta: "", queries=dict)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("as is\n", "as is\n"),
        (["a", "b"], "a\nb"),
        ([], "(empty list)"),
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        (None, "null"),
        ({"k": [1, "é"]}, '{\n  "k": [\n    1,\n    "é"\n  ]\n}'),
        ([1, "a"], '[\n  1,\n  "a"\n]'),
    ],
    ids=["str", "str-list", "empty-list", "int", "float", "bool", "none", "dict", "mixed-list"],
)
def test_default_serialisation(value: Any, text: str) -> None:
    """Strings as is, string lists joined, numbers as text, everything else 2-space JSON."""
    assert default_serialise(value) == text
    if text.startswith(("{", "[")):
        assert json.loads(text) == value


async def test_a_turn_queries_a_spooled_result_through_forged_tools() -> None:
    """In a real turn a long result is spooled, forged tools appear, and queries answer."""

    @tool_from_function
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "\n".join(f"row {i} value {i * i}" for i in range(2000))

    def propose(proposal_id: str, name: str, **args: Any) -> ProposedToolCall:
        return ProposedToolCall(id=proposal_id, name=name, arguments=json.dumps(args))

    model = ScriptedModel([
        ModelResponse(tool_calls=[propose("c1", "fetch", url="u")]),
        ModelResponse(tool_calls=[propose("c2", "artifact_grep", call_id="c1", pattern="^row 12 "),
                                  propose("c3", "artifact_head", call_id="made-up")]),
    ])
    result = await TurnRunner(executor=ToolLoopExecutor(model), tools=[fetch]).run("go")
    fetched, grepped, rejected = result.tool_calls
    assert isinstance(fetched.results, SpooledArtifact)
    assert "artifact_grep" in [t["name"] for t in model.requests[1].tools]
    assert (grepped.results, grepped.from_artifact_tool) == ("12:row 12 value 144", True)
    assert rejected.is_error
    assert "call_id" in str(rejected.results)
