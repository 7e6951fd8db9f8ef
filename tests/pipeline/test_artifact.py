"""SpooledArtifact: line queries over both stores, bad inputs, token estimates, tool methods."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.stores._file_spool as file_spool
from pipeline.artifacts import (
    SpooledArtifact,
    SpooledJsonArtifact,
    SpooledMarkdownArtifact,
    ToolMethod,
)
from pipeline.artifacts._args import CountArgs, TokenArgs
from pipeline.artifacts._artifact import own_tool_methods
from pipeline.artifacts._tokens import ENCODINGS, exact_tokens_available
from pipeline.errors import InvalidToolArgsError, NotASpoolReaderError
from pipeline.stores import FileSpoolStore, MemorySpoolStore

STORES = ["memory", "file"]
TEXT = "alpha\nBeta\ngamma delta\n\nepsilon\nalphabet"
LINES = TEXT.split("\n")


class ListReader:
    """The minimal reader: only the four protocol methods, no streaming helpers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")

    def line(self, i: int) -> str:
        if i < 0:
            raise IndexError(i)
        return self.lines[i]

    def byte_length(self) -> int:
        return len(self.text.encode())

    def line_count(self) -> int:
        return len(self.lines)

    def read_all(self) -> str:
        return self.text


def build(kind: str, tmp_path: Path, text: str = TEXT) -> SpooledArtifact:
    if kind == "memory":
        return SpooledArtifact(MemorySpoolStore().write("c1", text))
    if kind == "file":
        return SpooledArtifact(FileSpoolStore(tmp_path).write("c1", text))
    return SpooledArtifact(ListReader(text))


READERS = [*STORES, "minimal"]


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shrink the file reader's blocks so tiny bodies span many reads."""
    monkeypatch.setattr(file_spool, "_BLOCK", 4)
    monkeypatch.setattr(file_spool, "_READ", 16)


@pytest.fixture(params=READERS, ids=READERS)
def artifact(request: pytest.FixtureRequest, tmp_path: Path) -> SpooledArtifact:
    """TEXT as an artifact over each kind of reader."""
    return build(request.param, tmp_path)


def test_head_and_tail(artifact: SpooledArtifact) -> None:
    """head and tail return the first and last n lines; n=0 gives []; n past the end clamps."""
    assert artifact.head(2) == ["alpha", "Beta"]
    assert artifact.head() == LINES
    assert artifact.head(0) == []
    assert artifact.tail(2) == ["epsilon", "alphabet"]
    assert artifact.tail(100) == LINES
    assert artifact.tail(0) == []


@pytest.mark.parametrize("method", ["head", "tail"])
@pytest.mark.parametrize("bad", [-1, 1.5, "3", True], ids=["negative", "float", "str", "bool"])
def test_head_tail_reject_bad_counts(artifact: SpooledArtifact, method: str, bad: object) -> None:
    """A count that is not an integer >= 0 raises InvalidToolArgsError (a ValueError)."""
    with pytest.raises(InvalidToolArgsError) as info:
        getattr(artifact, method)(bad)
    assert info.value.code == "E_INVALID_TOOL_ARGS"
    assert isinstance(info.value, ValueError)


def test_grep_returns_matching_lines_with_zero_based_indexes(artifact: SpooledArtifact) -> None:
    """grep searches each line and prefixes matches with their 0-based index."""
    assert artifact.grep("^alpha") == ["0:alpha", "5:alphabet"]
    assert artifact.grep("bet") == ["5:alphabet"]
    assert artifact.grep("bet", flags="i") == ["1:Beta", "5:alphabet"]
    assert artifact.grep("^$") == ["3:"]
    assert artifact.grep("a", max_matches=2) == ["0:alpha", "1:Beta"]
    assert artifact.grep("nothing") == []


def test_grep_matches_per_line_even_with_multiline_flags(artifact: SpooledArtifact) -> None:
    """Patterns never span lines, whatever the m and s flags say."""
    assert artifact.grep("alpha.Beta", flags="s") == []
    assert artifact.grep("a$", flags="ms") == ["0:alpha", "1:Beta", "2:gamma delta"]


@pytest.mark.parametrize(
    ("pattern", "flags", "needle"),
    [("(", "", "invalid regular expression"), ("a", "x", "unknown grep flag 'x'"),
     ("[z-a]", "i", "invalid regular expression")],
    ids=["unbalanced", "bad-flag", "bad-range"],
)
def test_grep_rejects_bad_patterns_and_flags(
    artifact: SpooledArtifact, pattern: str, flags: str, needle: str
) -> None:
    """An invalid regex or flag raises InvalidToolArgsError naming the problem."""
    with pytest.raises(InvalidToolArgsError, match=needle) as info:
        artifact.grep(pattern, flags)
    assert info.value.code == "E_INVALID_TOOL_ARGS"


def test_grep_accepts_the_u_flag_as_a_no_op(artifact: SpooledArtifact) -> None:
    """The seeds' ``u`` flag is accepted and changes nothing (str patterns are Unicode)."""
    assert artifact.grep("bet", flags="iu") == artifact.grep("bet", flags="i")
    assert artifact.grep("^alpha", flags="u") == ["0:alpha", "5:alphabet"]


@pytest.mark.parametrize("kind", READERS)
def test_an_empty_body_has_no_lines(tmp_path: Path, kind: str) -> None:
    """An empty result has 0 lines: every line query gives [] (as the seeds do)."""
    artifact = build(kind, tmp_path, "")
    assert artifact.line_count() == 0
    assert artifact.head() == []
    assert artifact.tail() == []
    assert artifact.cat() == []
    assert artifact.cat(-1) == []
    assert artifact.grep("") == []
    assert list(artifact.lines()) == []
    assert repr(artifact) == "<SpooledArtifact 0 bytes, 0 lines>"


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.parametrize(
    ("text", "lines"),
    [("\n", ["", ""]), ("a\n", ["a", ""]), ("a", ["a"]), (" ", [" "])],
    ids=["newline", "trailing-newline", "one-line", "one-space"],
)
def test_a_non_empty_body_keeps_its_final_empty_line(
    tmp_path: Path, kind: str, text: str, lines: list[str]
) -> None:
    """Only the empty body is special: a trailing newline still gives a final empty line."""
    artifact = build(kind, tmp_path, text)
    assert artifact.line_count() == len(lines)
    assert artifact.head() == lines
    assert artifact.tail() == lines
    assert artifact.cat() == lines


def test_grep_rejects_zero_max_matches(artifact: SpooledArtifact) -> None:
    """max_matches below 1 is an argument error."""
    with pytest.raises(InvalidToolArgsError, match="max_matches"):
        artifact.grep("a", max_matches=0)


@pytest.mark.parametrize(
    ("start", "end"),
    [(None, None), (1, 3), (-2, None), (None, -4), (4, 2), (10, 20), (-100, 2), (2, 2)],
    ids=["all", "range", "neg-start", "neg-end", "reversed", "past-end", "far-neg", "empty"],
)
def test_cat_has_slice_semantics(
    artifact: SpooledArtifact, start: int | None, end: int | None
) -> None:
    """cat(start, end) equals lines[start:end], negative indexes and empty ranges included."""
    assert artifact.cat(start, end) == LINES[start:end]


def test_cat_rejects_non_integer_bounds(artifact: SpooledArtifact) -> None:
    """A bound that is neither an int nor None raises InvalidToolArgsError."""
    with pytest.raises(InvalidToolArgsError, match="start"):
        artifact.cat("1")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", READERS)
@pytest.mark.usefixtures("small_blocks")
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet="ab\n", max_size=30), start=st.none() | st.integers(-12, 12),
       end=st.none() | st.integers(-12, 12), n=st.integers(0, 12))
def test_queries_agree_with_python_lists(
    tmp_path: Path, kind: str, text: str, start: int | None, end: int | None, n: int
) -> None:
    """cat, head and tail agree with list slicing over str.split for any text and range.

    The one exception to str.split: an empty body has no lines (split gives ``[""]``).
    """
    artifact = build(kind, tmp_path, text)
    lines = text.split("\n") if text else []
    assert artifact.cat(start, end) == lines[start:end]
    assert artifact.head(n) == lines[:n]
    assert artifact.tail(n) == (lines[-n:] if n else [])
    assert artifact.line_count() == len(lines)
    assert artifact.grep("^a|b$") == [f"{i}:{line}" for i, line in enumerate(lines)
                                      if re.search("^a|b$", line)]


def test_sizes_and_text(artifact: SpooledArtifact) -> None:
    """byte_length, line_count and as_string describe the body exactly."""
    assert artifact.byte_length() == len(TEXT) == 40
    assert artifact.line_count() == 6
    assert artifact.as_string() == TEXT


def test_estimate_tokens_is_in_a_sensible_range(tmp_path: Path) -> None:
    """The offline estimate for English prose lands near 1.3 tokens per word."""
    prose = ("The quick brown fox jumps over the lazy dog near the river bank. " * 200).strip()
    artifact = build("memory", tmp_path, prose)
    words = len(prose.split())
    estimate = artifact.estimate_tokens()
    assert words * 0.9 <= estimate <= words * 1.6
    assert artifact.estimate_tokens("o200k_base") <= estimate
    assert build("memory", tmp_path, "").estimate_tokens() == 0


def test_large_bodies_are_estimated_from_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the sampling threshold the estimate scales windows by size, close to a full pass."""
    import pipeline.artifacts._artifact as artifact_module
    from pipeline.artifacts._tokens import estimate_tokens

    text = "\n".join(f"entry {i}: status=ok latency={i % 97}ms user=u{i % 13}"
                     for i in range(20_000))
    artifact = build("file", tmp_path, text)
    full = estimate_tokens(artifact.lines())
    assert artifact.estimate_tokens() == full
    monkeypatch.setattr(artifact_module, "_SAMPLE_ABOVE", 10_000)
    sampled = artifact.estimate_tokens()
    assert sampled != full
    assert abs(sampled - full) / full < 0.05


SEED_ENCODINGS = ["claude", "gemini", "llama2", "llama3", "mistral", "gpt2", "p50k_edit"]


@pytest.mark.parametrize("encoding", SEED_ENCODINGS)
def test_estimate_tokens_accepts_the_seeds_encoding_names(tmp_path: Path, encoding: str) -> None:
    """The seeds' model family names are accepted and estimated offline near cl100k's count."""
    prose = ("The quick brown fox jumps over the lazy dog near the river bank. " * 200).strip()
    artifact = build("memory", tmp_path, prose)
    baseline = artifact.estimate_tokens()
    assert encoding in ENCODINGS
    assert 0.8 * baseline <= artifact.estimate_tokens(encoding) <= 1.3 * baseline
    assert build("memory", tmp_path, "").estimate_tokens(encoding) == 0


@pytest.mark.parametrize("encoding", ["claude", "gemini", "llama2", "llama3", "mistral"])
def test_model_family_names_always_fall_back_to_the_estimator(encoding: str) -> None:
    """No local tokenizer data exists for the model families, so they are never exact."""
    assert not exact_tokens_available(encoding)


def test_the_token_tool_lists_every_accepted_encoding() -> None:
    """The artifact_estimate_tokens schema offers exactly ENCODINGS, cl100k_base by default."""
    schema = TokenArgs.model_json_schema()["properties"]["encoding"]
    assert schema["enum"] == list(ENCODINGS)
    assert schema["default"] == "cl100k_base"


def test_estimate_tokens_rejects_unknown_encodings(artifact: SpooledArtifact) -> None:
    """An unknown encoding name is an argument error, never a download attempt."""
    with pytest.raises(InvalidToolArgsError, match="unknown encoding"):
        artifact.estimate_tokens("gpt-9000")


@pytest.mark.parametrize("bad", [None, "text", 42, object()], ids=["none", "str", "int", "obj"])
def test_non_reader_raises_not_a_spool_reader(bad: object) -> None:
    """Anything without the reader methods raises NotASpoolReaderError (a TypeError)."""
    with pytest.raises(NotASpoolReaderError) as info:
        SpooledArtifact(bad)  # type: ignore[arg-type]
    assert info.value.code == "E_NOT_A_SPOOL_READER"
    assert isinstance(info.value, TypeError)


def test_repr_shows_class_bytes_and_lines(tmp_path: Path) -> None:
    """The repr names the class, the byte length and the line count."""
    assert repr(build("memory", tmp_path)) == "<SpooledArtifact 40 bytes, 6 lines>"
    assert type(build("memory", tmp_path)).__module__ == "pipeline.artifacts"


def test_base_tool_methods_are_the_documented_ones() -> None:
    """SpooledArtifact declares the seven base query methods, each a real method."""
    names = [m.name for m in SpooledArtifact.tool_methods]
    assert names == [
        "artifact_head", "artifact_tail", "artifact_grep", "artifact_cat",
        "artifact_byte_length", "artifact_line_count", "artifact_estimate_tokens",
    ]
    for method in SpooledArtifact.tool_methods:
        assert isinstance(method.method, str)
        assert callable(getattr(SpooledArtifact, method.method))


def test_subclasses_add_their_methods_after_the_base_ones() -> None:
    """all_tool_methods lists base methods first, then the subclass's own."""
    json_names = [m.name for m in SpooledJsonArtifact.all_tool_methods()]
    md_names = [m.name for m in SpooledMarkdownArtifact.all_tool_methods()]
    assert json_names[:7] == [m.name for m in SpooledArtifact.tool_methods]
    assert json_names[7:] == [f"artifact_json_{n}" for n in
                              ("type", "keys", "length", "get", "filter", "pluck", "slice")]
    assert md_names[7:] == [f"artifact_md_{n}" for n in
                            ("frontmatter", "headings", "sections", "code_blocks", "links",
                             "images", "text", "ast")]


def test_own_tool_methods_ignore_repeated_base_methods() -> None:
    """A subclass that repeats its base's methods only owns the new ones."""
    extra = ToolMethod(name="artifact_first_word", method=lambda a: a.head(1)[0].split()[0],
                       description="First word.", args_schema=CountArgs)

    class Repeating(SpooledArtifact):
        tool_methods = (*SpooledArtifact.tool_methods, extra)

    class OnlyNew(SpooledArtifact):
        tool_methods = (extra,)

    assert own_tool_methods(Repeating) == (extra,)
    assert own_tool_methods(OnlyNew) == (extra,)
    assert Repeating.all_tool_methods() == (*SpooledArtifact.tool_methods, extra)
    artifact = Repeating(MemorySpoolStore().write("x", "hello world\nbye"))
    assert extra.bind(artifact)() == "hello"


def test_catastrophic_backtracking_is_stopped_with_a_typed_error() -> None:
    """A pattern like ``(a|aa)+$`` on a hostile line is cut off at the time limit, not hung."""
    import time

    from pipeline.artifacts import SpooledArtifact
    from pipeline.errors import InvalidToolArgsError
    from pipeline.stores import MemorySpoolStore

    artifact = SpooledArtifact(MemorySpoolStore().write("redos", "a" * 40 + "!"))
    started = time.process_time()  # CPU time: the limit holds however loaded the machine is
    with pytest.raises(InvalidToolArgsError) as err:
        artifact.grep(r"(a|aa)+$")
    assert time.process_time() - started < 5
    assert err.value.code == "E_INVALID_TOOL_ARGS"
    assert "took longer" in err.value.message
