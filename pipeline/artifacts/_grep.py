r"""Grep over a spooled body: pattern compilation and a search that ends at a real deadline.

A model writes the pattern, so a search must survive a pattern that backtracks catastrophically
(``(a|aa)+$``, ``(?:a|a?)+$``) and must still be fast on ordinary ones. Two engines share the
work, line by line, with the same results:

- the stdlib `re`, where the work is provably bounded: the pattern's shape
  (``_grep_shape.pattern_shape``) bounds the steps of one line's search by its length, and lines
  go to `re` in runs whose summed bound is at most `_STEP_BUDGET` (about a tenth of a second),
  with the deadline checked between runs;
- the `regex` module otherwise (a pattern that can backtrack exponentially, one `re` cannot read,
  or a line too long for the bound): each line's match gets the time *left* until one deadline
  for the whole search, so thousands of moderately slow lines cannot run past it. When every
  match must contain a literal (``ERROR`` in ``ERROR.*(a|b)+``), lines without it are skipped
  at C speed first.

Both engines read the same syntax, but their Unicode tables differ at the edges: the stdlib's
``\w`` also matches superscript digits and vulgar fractions, its ``\s`` the separators
``\x1c``-``\x1f``, and `regex`'s ``\d`` knows digits added in newer Unicode versions. For such
characters a line's match depends on the engine it went to (almost always `re`, the Python
semantics the tool promises).

A search that ends after the deadline returns an error, never results. The `regex` timeout
counts the matching thread's CPU time, not wall time, so on a busy machine a call may end later
than the deadline by the share of the CPU the thread did not get. The forged ``artifact_grep``
tool adds a wall-clock limit on top (``ToolMethod.time_limit``), so the model reads an error call
on time whatever the machine's load. `regex` is imported by the first grep, not by the package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress, repeat, starmap
from operator import contains, sub
from time import monotonic
from typing import TYPE_CHECKING, Any

from ..errors import InvalidToolArgsError
from ._grep_shape import PatternShape, pattern_shape, required_literal

if TYPE_CHECKING:
    import regex

__all__ = [
    "GREP_SECONDS_PER_MB",
    "GREP_TIME_LIMIT",
    "GrepPattern",
    "compile_grep",
    "grep_budget",
    "grep_timeout_error",
    "iter_matches",
    "regex_module",
    "search_lines",
]

GREP_TIME_LIMIT = 2.0
"""Seconds one `SpooledArtifact.grep` may take, plus `GREP_SECONDS_PER_MB` per megabyte of body:
a model-supplied pattern that backtracks catastrophically (``(a|aa)+$``) is stopped with an error
instead of running on, while an ordinary search of a large body completes."""

GREP_SECONDS_PER_MB = 1.0
"""The time allowance `grep` adds per megabyte of body (see `GREP_TIME_LIMIT`)."""

_STEP_BUDGET = 20_000_000
"""Backtracking steps (by the shape's bound) one run of lines given to `re` may take."""

# ``u`` (Unicode) is accepted as a no-op, as the seeds do: str patterns are always Unicode.
_FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": 0}


@lru_cache(maxsize=1)
def regex_module() -> Any:
    """The `regex` module, imported on first use (it is not needed by ``import pipeline``)."""
    import regex as module

    return module


@dataclass(frozen=True, slots=True)
class GrepPattern:
    """A compiled grep pattern: the time-limited `regex` form, and `re` where that is safe."""

    pattern: str
    """The pattern as written."""

    slow: regex.Pattern[str]
    """The `regex` form (any pattern, matches time-limited)."""

    fast: re.Pattern[str] | None
    """The `re` form, when the pattern's backtracking is bounded (see ``_grep_shape``)."""

    shape: PatternShape | None
    """The pattern's backtracking bound, when it has one."""

    literal: str | None
    """A literal every match contains (lines without it cannot match), or None."""


def _flag_bits(flags: str) -> int:
    bits = 0
    for char in flags:
        bit = _FLAG_BITS.get(char)
        if bit is None:
            raise InvalidToolArgsError(
                f"unknown grep flag {char!r}: flags are made of 'i', 'm', 's' and 'u'",
                field="flags",
            )
        bits |= bit
    return bits


def compile_grep(pattern: str, flags: str = "") -> GrepPattern:
    """Compile a grep pattern with flags from ``i``, ``m``, ``s`` and ``u`` (a no-op).

    Raises:
        InvalidToolArgsError: the flags hold another character, or the pattern is not a valid
            Python regular expression; the message says which and where.
    """
    if not isinstance(pattern, str):
        raise InvalidToolArgsError(
            f"pattern must be a string, not {type(pattern).__name__}", field="pattern"
        )
    if not isinstance(flags, str):
        raise InvalidToolArgsError(
            f"flags must be a string, not {type(flags).__name__}", field="flags"
        )
    return _compiled(pattern, _flag_bits(flags))


@lru_cache(maxsize=256)
def _compiled(pattern: str, bits: int) -> GrepPattern:
    module = regex_module()
    try:
        slow = module.compile(pattern, bits)
    except module.error as exc:
        raise InvalidToolArgsError(
            f"invalid regular expression {pattern!r}: {exc}", field="pattern"
        ) from exc
    shape = pattern_shape(pattern, bits)
    fast: re.Pattern[str] | None = None
    if shape is not None:
        try:
            fast = re.compile(pattern, bits)
        except re.error:
            shape = None
    return GrepPattern(pattern, slow, fast, shape, required_literal(pattern, bits))


def grep_budget(byte_length: int) -> float:
    """Return the seconds a grep of a body of ``byte_length`` bytes may take."""
    return GREP_TIME_LIMIT + GREP_SECONDS_PER_MB * byte_length / 1_000_000


def grep_timeout_error(pattern: str, budget: float) -> InvalidToolArgsError:
    """Return the error a grep that ran out of time raises (``E_INVALID_TOOL_ARGS``)."""
    return InvalidToolArgsError(
        f"the pattern {pattern!r} took longer than {budget:.1f} s to search; simplify it "
        "(overlapping alternatives such as (a|aa)+ backtrack catastrophically)",
        field="pattern",
    )


def iter_matches(
    pattern: GrepPattern, batches: Iterable[list[str]], *, deadline: float, first: int = 0
) -> Iterator[tuple[int, str]]:
    """Yield ``(index, line)`` for each line of ``batches`` that ``pattern`` matches, in order.

    ``first`` is the index of the first line. ``deadline`` is a `time.monotonic` value for the
    whole search: the iterator raises once it has passed, never yielding a match after it.

    Raises:
        TimeoutError: the deadline passed before the search ended.
    """
    base = first
    for batch in batches:
        offsets = _batch_matches(pattern, batch, deadline)
        if monotonic() > deadline:
            raise TimeoutError
        for offset in offsets:
            yield base + offset, batch[offset]
        base += len(batch)
    if monotonic() > deadline:
        raise TimeoutError


def _batch_matches(pattern: GrepPattern, batch: list[str], deadline: float) -> list[int]:
    """Return the offsets of the matching lines of ``batch``, in order."""
    if not batch:
        return []
    shape, fast = pattern.shape, pattern.fast
    if shape is None or fast is None:
        return _slow_offsets(pattern, batch, range(len(batch)), deadline)
    longest = max(map(len, batch))
    per_line = shape.steps(longest)
    if per_line <= _STEP_BUDGET:
        return _fast_offsets(fast.search, batch, range(len(batch)), per_line, deadline)
    # Some lines are too long for `re`'s bound: they go to `regex`, the others to `re`.
    limit = _longest_fast_line(shape)
    too_long = set(compress(range(len(batch)), map(int.__gt__, map(len, batch), repeat(limit))))
    short = [i for i in range(len(batch)) if i not in too_long]
    found = _fast_offsets(fast.search, batch, short, shape.steps(limit), deadline)
    found += _slow_offsets(pattern, batch, sorted(too_long), deadline)
    found.sort()
    return found


def _longest_fast_line(shape: PatternShape) -> int:
    """Return the longest line whose bound fits `_STEP_BUDGET` (0 when none does)."""
    length = int((_STEP_BUDGET / shape.factor) ** (1 / (shape.degree + 1)))
    while length > 0 and shape.steps(length) > _STEP_BUDGET:
        length -= 1
    return length


def _fast_offsets(
    search: Any, batch: list[str], offsets: range | list[int], per_line: int, deadline: float
) -> list[int]:
    """Run `re` over ``batch[offsets]`` in runs of bounded work, checking the deadline."""
    run = max(1, _STEP_BUDGET // max(per_line, 1))
    if isinstance(offsets, range) and len(offsets) == len(batch) and run >= len(batch):
        return list(compress(offsets, map(search, batch)))  # the whole batch in one run
    found: list[int] = []
    whole = isinstance(offsets, range) and len(offsets) == len(batch)
    for start in range(0, len(offsets), run):
        if whole:
            stop = min(start + run, len(batch))
            found.extend(compress(range(start, stop), map(search, batch[start:stop])))
        else:
            part = offsets[start : start + run]
            found.extend(compress(part, map(search, [batch[i] for i in part])))
        if monotonic() > deadline:
            raise TimeoutError
    return found


def _slow_offsets(
    pattern: GrepPattern, batch: list[str], offsets: range | list[int], deadline: float
) -> list[int]:
    """Run the time-limited `regex` over ``batch[offsets]``, skipping lines without the literal."""
    literal = pattern.literal
    if literal is not None:
        offsets = list(compress(offsets, map(contains, (batch[i] for i in offsets),
                                             repeat(literal))))
    if not offsets:
        return []
    lines = batch if isinstance(offsets, range) else [batch[i] for i in offsets]
    # The time left, computed in C for every call: regex treats a timeout of 0 as already
    # expired and a negative one as no timeout at all, hence the floor at 0.
    time_left = map(max, map(sub, repeat(deadline), starmap(monotonic, repeat(()))), repeat(0.0))
    no_pos = repeat(None)
    # search(string, pos, endpos, concurrent, partial, timeout): positional, so that the
    # per-line loop stays in C (map/compress) and only matching lines reach Python. map
    # reads time_left only after it has a line, so no value goes stale between batches.
    matches = map(pattern.slow.search, lines, no_pos, no_pos, no_pos, repeat(False), time_left)
    return list(compress(offsets, matches))


def search_lines(
    pattern: GrepPattern,
    batches: Iterable[list[str]],
    *,
    deadline: float,
    max_matches: int | None = None,
    first: int = 0,
) -> list[str]:
    """Return ``"INDEX:line"`` for each line of ``batches`` that ``pattern`` matches.

    ``first`` is the index of the first line; ``deadline`` as for `iter_matches`.

    Raises:
        TimeoutError: the deadline passed before the search ended.
    """
    found: list[str] = []
    limit = -1 if max_matches is None else max_matches
    for index, line in iter_matches(pattern, batches, deadline=deadline, first=first):
        found.append(f"{index}:{line}")
        if len(found) == limit:
            break
    return found
