"""Grep over a spooled body: pattern compilation and a search that ends at a real deadline.

A model writes the pattern, so a search must survive a pattern that backtracks catastrophically
(``(a|aa)+$``, ``(?:a|a?)+$``). The `regex` module stops a match after ``timeout`` seconds, but
that timeout belongs to one call (one line), so a per-line timeout equal to the whole budget
lets thousands of moderately slow lines run far past it. Here every call gets the time that is
*left* until one deadline for the whole search, and a search that ends after the deadline
returns an error, never results.

The `regex` timeout counts the matching thread's CPU time, not wall time, so on a busy machine a
call may end later than the deadline by the share of the CPU the thread did not get. The forged
``artifact_grep`` tool adds a wall-clock limit on top (``ToolMethod.time_limit``), so the model
reads an error call on time whatever the machine's load.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress, repeat, starmap
from operator import sub
from time import monotonic

import regex
from pydantic import Field, field_validator

from .._errors import InvalidToolArgsError
from ._args import ArgsModel

__all__ = [
    "GREP_SECONDS_PER_MB",
    "GREP_TIME_LIMIT",
    "GrepArgs",
    "compile_grep",
    "grep_budget",
    "grep_timeout_error",
    "search_lines",
]

GREP_TIME_LIMIT = 2.0
"""Seconds one `SpooledArtifact.grep` may take, plus `GREP_SECONDS_PER_MB` per megabyte of body:
a model-supplied pattern that backtracks catastrophically (``(a|aa)+$``) is stopped with an error
instead of running on, while an ordinary search of a large body completes."""

GREP_SECONDS_PER_MB = 1.0
"""The time allowance `grep` adds per megabyte of body (see `GREP_TIME_LIMIT`)."""

# ``u`` (Unicode) is accepted as a no-op, as the seeds do: str patterns are always Unicode.
_FLAG_BITS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL, "u": 0}


def compile_grep(pattern: str, flags: str = "") -> regex.Pattern[str]:
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
    bits = 0
    for char in flags:
        bit = _FLAG_BITS.get(char)
        if bit is None:
            raise InvalidToolArgsError(
                f"unknown grep flag {char!r}: flags are made of 'i', 'm', 's' and 'u'",
                field="flags",
            )
        bits |= bit
    try:
        return regex.compile(pattern, bits)
    except regex.error as exc:
        raise InvalidToolArgsError(
            f"invalid regular expression {pattern!r}: {exc}", field="pattern"
        ) from exc


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


def search_lines(
    pattern: regex.Pattern[str],
    batches: Iterable[list[str]],
    *,
    deadline: float,
    max_matches: int | None = None,
) -> list[str]:
    """Return ``"INDEX:line"`` for each line of ``batches`` that ``pattern`` matches.

    ``deadline`` is a `time.monotonic` value for the whole search: each line's match gets the
    time left until it, and a search still running (or finishing) after it raises.

    Raises:
        TimeoutError: the deadline passed before the search ended.
    """
    search = pattern.search
    limit = -1 if max_matches is None else max_matches
    found: list[str] = []
    # The time left, computed in C for every call: regex treats a timeout of 0 as already
    # expired and a negative one as no timeout at all, hence the floor at 0.
    time_left = map(max, map(sub, repeat(deadline), starmap(monotonic, repeat(()))), repeat(0.0))
    no_pos = repeat(None)
    base = 0
    for batch in batches:
        # search(string, pos, endpos, concurrent, partial, timeout): positional, so that the
        # per-line loop stays in C (map/compress) and only matching lines reach Python. map
        # reads time_left only after it has a line, so no value goes stale between batches.
        matches = map(search, batch, no_pos, no_pos, no_pos, repeat(False), time_left)
        for offset in compress(range(len(batch)), matches):
            found.append(f"{base + offset}:{batch[offset]}")
            if len(found) == limit:
                return _in_time(found, deadline)
        base += len(batch)
    return _in_time(found, deadline)


def _in_time(found: list[str], deadline: float) -> list[str]:
    # A fast line may finish a call that started just before the deadline: no result after it.
    if monotonic() > deadline:
        raise TimeoutError
    return found


class GrepArgs(ArgsModel):
    """A per-line regular expression search."""

    pattern: str = Field(description="Python regular expression, matched against each line.")
    flags: str = Field(
        default="",
        pattern=r"^[imsu]*$",
        description=(
            "Any of 'i' (ignore case), 'm' (multiline), 's' (dot matches all), "
            "'u' (Unicode; always on)."
        ),
    )
    max_matches: int | None = Field(
        default=None, ge=1, description="Stop after this many matching lines (null: no limit)."
    )

    @field_validator("pattern")
    @classmethod
    def _valid_regex(cls, value: str) -> str:
        try:
            regex.compile(value)
        except regex.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
        return value
