"""Grep's two engines: stdlib ``re`` where backtracking is provably bounded, the
time-limited ``regex`` otherwise; the same results either way, and no pattern or line can make a
search run past its deadline."""

from __future__ import annotations

import re
import time
from time import monotonic

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.artifacts._grep as grep_module
from pipeline.artifacts import SpooledArtifact
from pipeline.artifacts._grep_shape import pattern_shape, required_literal
from pipeline.errors import InvalidToolArgsError
from pipeline.stores import MemorySpoolStore

SLACK = 3.0  # regex's timeout counts CPU time: on a loaded machine the wall clock runs ahead


def regex_only(pattern: str, flags: str, lines: list[str]) -> list[str]:
    """What grep finds through the time-limited regex path alone."""
    compiled = grep_module.compile_grep(pattern, flags)
    slow = grep_module.GrepPattern(pattern, compiled.slow, None, None, None)
    return grep_module.search_lines(slow, [lines], deadline=monotonic() + 30)


@pytest.mark.parametrize(
    "pattern",
    [r"(a|aa)+$", r"(?:a|a?)+$", r"(a+)+b", r"(\w{1,9}){1,9}x", r"(a)\1", r"(?:x|yy)*z",
     r"(a*)*", r"(?P<q>')x(?P=q)"],
)
def test_patterns_that_can_backtrack_exponentially_have_no_bound(pattern: str) -> None:
    """Nested repeats, alternation under a repeat and back-references never go to re."""
    assert pattern_shape(pattern, 0) is None
    assert grep_module.compile_grep(pattern).fast is None


@pytest.mark.parametrize(
    ("pattern", "degree"),
    [("ERROR", 0), (r"\d{1,3}\.\d{1,3}", 0), (r"latency=\d+ms", 1), (r"a.*b.*c", 2),
     (r"(?:\w|\d)+", 1), (r"(ab)+", 1), (r"user (ann|bob) id", 0)],
)
def test_ordinary_patterns_have_a_polynomial_bound(pattern: str, degree: int) -> None:
    """Flat patterns get a degree (unbounded repeats) and go to re."""
    shape = pattern_shape(pattern, 0)
    assert shape is not None
    assert shape.degree == degree
    assert grep_module.compile_grep(pattern).fast is not None


def test_a_pattern_only_regex_reads_still_works() -> None:
    """Syntax re lacks (\\p{L}) runs on the regex path with the same deadline."""
    compiled = grep_module.compile_grep(r"\p{Lu}\w+")
    assert compiled.fast is None
    artifact = SpooledArtifact(MemorySpoolStore().write("a1", "hello\nWorld\n éclair\nÉté"))
    assert artifact.grep(r"\p{Lu}\w+") == ["1:World", "3:Été"]


@pytest.mark.parametrize(
    ("pattern", "flags", "literal"),
    [("ERROR.*(a|b)+", 0, "ERROR"), ("x(?:abc)y", 0, "xabcy"), ("ab|cd", 0, None),
     ("ERROR", re.IGNORECASE, None), ("(?i)ERROR", 0, None), ("a(?i:bc)d", 0, "a")],
)
def test_the_required_literal_is_only_taken_where_every_match_has_it(
    pattern: str, flags: int, literal: str | None
) -> None:
    """Alternations and case-insensitive parts give no literal to prefilter on."""
    assert required_literal(pattern, flags) == literal


ALPHABET = st.sampled_from(["a", "b", "ab", "a|b", "(a|ab)", "a*", "b+", ".", "\\d", "x?",
                            "(?:ab)+", "[ab]", "$", "^", "\\b", "a{1,3}", "(a+)+", "(?i)A"])


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(ALPHABET, min_size=1, max_size=5),
    lines=st.lists(st.text(alphabet="abx1 A", max_size=30), min_size=1, max_size=20),
    flags=st.sampled_from(["", "i", "m", "s"]),
)
def test_both_engines_find_the_same_lines(parts: list[str], lines: list[str], flags: str) -> None:
    """Whatever the pattern's shape, grep's answer equals the regex-only answer."""
    pattern = "".join(parts)
    try:
        re.compile(pattern)
    except re.error:
        return  # e.g. a global flag in the middle: not a pattern a search could use
    artifact = SpooledArtifact(MemorySpoolStore().write("a1", "\n".join(lines)))
    body = list(artifact.lines())  # an empty body has no lines at all
    assert artifact.grep(pattern, flags) == regex_only(pattern, flags, body)


def test_a_long_line_cannot_freeze_a_bounded_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """1+2 is polynomial, but on a 200,000-character line it is n² (re alone takes about a minute
    here): that line goes to regex, and the search stops at its deadline."""
    monkeypatch.setattr(grep_module, "GREP_TIME_LIMIT", 0.5)
    monkeypatch.setattr(grep_module, "GREP_SECONDS_PER_MB", 0.0)
    artifact = SpooledArtifact(MemorySpoolStore().write("a1", "ok 12\n2" + "1" * 200_000))
    assert grep_module.compile_grep("1+2").fast is not None  # the pattern alone would go to re
    started = time.perf_counter()
    with pytest.raises(InvalidToolArgsError, match="took longer than"):
        artifact.grep("1+2")
    assert time.perf_counter() - started < 0.5 + SLACK


def test_short_lines_beside_a_long_one_still_match() -> None:
    """A batch split between the engines keeps its matches in line order."""
    lines = ["1x", "2" * 30_000 + "x", "3x", "nothing", "4x"]
    artifact = SpooledArtifact(MemorySpoolStore().write("a1", "\n".join(lines)))
    found = artifact.grep(r"\d+x")
    assert [entry.split(":", 1)[0] for entry in found] == ["0", "1", "2", "4"]


def test_grep_takes_a_line_range() -> None:
    """start_line and end_line bound the search; indexes stay those of the body."""
    artifact = SpooledArtifact(MemorySpoolStore().write("a1", "\n".join(["hit"] * 10)))
    assert artifact.grep("hit", start_line=7) == ["7:hit", "8:hit", "9:hit"]
    assert artifact.grep("hit", start_line=2, end_line=4) == ["2:hit", "3:hit"]
    assert artifact.grep("hit", start_line=20) == []
    with pytest.raises(InvalidToolArgsError):
        artifact.grep("hit", start_line=-1)
