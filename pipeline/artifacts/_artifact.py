"""`SpooledArtifact`: a large tool result kept in a spool store and queried by line.

Line numbers everywhere in the artifact API (``grep`` prefixes, ``cat`` indexes, Markdown
records) are 0-based line indexes, the same indexes ``cat`` and ``SpoolReader.line`` take, so a
line number from one query can be fed to ``cat`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import compress, islice
from time import monotonic
from typing import TYPE_CHECKING, ClassVar, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._errors import InvalidToolArgsError, NotASpoolReaderError
from ._tokens import ENCODINGS, estimate_tokens, exact_tokens_available
from ._toolmethod import ToolMethod

if TYPE_CHECKING:
    from .._registry import ToolRegistry
    from ..stores._spool import SpoolReader
    from ._forge import ArtifactContext

__all__ = ["SpooledArtifact", "compile_grep", "install_forger", "own_tool_methods"]

Forger = Callable[[type["SpooledArtifact"], "ArtifactContext"], "ToolRegistry"]
"""Builds the query tools of an artifact class for a turn (``pipeline/artifacts/_forge.py``)."""

_forger: list[Forger] = []


def install_forger(forger: Forger) -> None:
    """Plug in the forging of query tools (done once, by ``_forge`` as it is imported).

    Forging builds `Tool` s, and a `Tool` knows the `SpooledArtifact` class its results are
    wrapped in; handing the forger in here keeps that pair of modules free of an import loop.
    """
    _forger[:] = [forger]

_READER_METHODS = ("line", "byte_length", "line_count", "read_all")
_FLAG_BITS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}

GREP_TIME_LIMIT = 2.0
"""Seconds one `SpooledArtifact.grep` may spend matching, plus `GREP_SECONDS_PER_MB` per
megabyte of body: a model-supplied pattern that backtracks catastrophically (``(a|aa)+$``) is
stopped instead of freezing every turn, while an ordinary search of a large body completes."""

GREP_SECONDS_PER_MB = 1.0
"""The time allowance `grep` adds per megabyte of body (see `GREP_TIME_LIMIT`)."""
_SAMPLE_ABOVE = 4 << 20
_WINDOWS = 8
_WINDOW_LINES = 512


def compile_grep(pattern: str, flags: str = "") -> regex.Pattern[str]:
    """Compile a grep pattern with flags from ``i``, ``m``, ``s``.

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
                f"unknown grep flag {char!r}: flags are made of 'i', 'm' and 's'", field="flags"
            )
        bits |= bit
    try:
        return regex.compile(pattern, bits)
    except regex.error as exc:
        raise InvalidToolArgsError(
            f"invalid regular expression {pattern!r}: {exc}", field="pattern"
        ) from exc


def _check_count(n: object, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidToolArgsError(f"{name} must be an integer, not {type(n).__name__}", field=name)
    if n < 0:
        raise InvalidToolArgsError(f"{name} must be 0 or more, got {n}", field=name)
    return n


def _check_index(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidToolArgsError(
            f"{name} must be an integer or null, not {type(value).__name__}", field=name
        )
    return value


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArgs(_Args):
    """No arguments besides ``call_id``."""


class CountArgs(_Args):
    """How many lines to return."""

    n: int = Field(default=10, ge=0, description="Number of lines to return.")


class GrepArgs(_Args):
    """A per-line regular expression search."""

    pattern: str = Field(description="Python regular expression, matched against each line.")
    flags: str = Field(
        default="",
        pattern=r"^[ims]*$",
        description="Any of 'i' (ignore case), 'm' (multiline), 's' (dot matches all).",
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


class CatArgs(_Args):
    """A range of lines with Python slice semantics."""

    start: int | None = Field(
        default=None, description="First line index (0-based; negative counts from the end)."
    )
    end: int | None = Field(
        default=None, description="Index after the last line (exclusive; null: to the end)."
    )


class TokenArgs(_Args):
    """The tokenizer to estimate for."""

    encoding: Literal["cl100k_base", "o200k_base", "p50k_base", "r50k_base"] = Field(
        default="cl100k_base", description="Tokenizer encoding name."
    )


class SpooledArtifact:
    """A spooled tool result that the model reads through query tools instead of in full.

    Build it over any `SpoolReader` (anything with ``line``, ``byte_length``, ``line_count`` and
    ``read_all``). Readers that also offer ``iter_lines(start, end)`` and ``tail_lines(n)`` (the
    built-in stores' readers do) are streamed, so ``head``, ``tail``, ``grep`` and ``cat`` never
    load a file-backed body whole.

    Raises:
        NotASpoolReaderError: ``reader`` lacks one of the reader methods.
    """

    __slots__ = ("__weakref__", "_batches", "_iter_lines", "_reader", "_tail_lines")

    tool_methods: ClassVar[tuple[ToolMethod, ...]]
    """The query methods offered to the model (DESIGN 10.2)."""

    def __init__(self, reader: SpoolReader) -> None:
        """Wrap ``reader``."""
        for name in _READER_METHODS:
            if not callable(getattr(reader, name, None)):
                raise NotASpoolReaderError(
                    f"{type(reader).__name__} is not a spool reader: it has no {name}() method",
                    reader_type=type(reader).__name__,
                )
        self._reader = reader
        iter_lines = getattr(reader, "iter_lines", None)
        tail_lines = getattr(reader, "tail_lines", None)
        batches = getattr(reader, "iter_line_batches", None)
        self._iter_lines: Callable[[int, int | None], Iterable[str]] | None = (
            iter_lines if callable(iter_lines) else None
        )
        self._tail_lines: Callable[[int], list[str]] | None = (
            tail_lines if callable(tail_lines) else None
        )
        self._batches: Callable[[int], Iterable[list[str]]] | None = (
            batches if callable(batches) else None
        )

    @property
    def reader(self) -> SpoolReader:
        """The reader over the spooled body."""
        return self._reader

    def lines(self, start: int = 0, end: int | None = None) -> Iterator[str]:
        """Yield lines ``start`` (>= 0) to ``end`` (exclusive; None: to the end), streaming."""
        if self._iter_lines is not None:
            return iter(self._iter_lines(start, end))
        reader = self._reader
        stop = reader.line_count() if end is None else min(end, reader.line_count())
        return (reader.line(i) for i in range(start, stop))

    def head(self, n: int = 10) -> list[str]:
        """Return the first ``n`` lines.

        Raises:
            InvalidToolArgsError: ``n`` is not an integer >= 0.
        """
        n = _check_count(n)
        return list(islice(self.lines(0, n), n)) if n else []

    def tail(self, n: int = 10) -> list[str]:
        """Return the last ``n`` lines.

        Raises:
            InvalidToolArgsError: ``n`` is not an integer >= 0.
        """
        n = _check_count(n)
        if n == 0:
            return []
        if self._tail_lines is not None:
            return self._tail_lines(n)
        count = self._reader.line_count()
        return list(self.lines(max(0, count - n), count))

    def grep(self, pattern: str, flags: str = "", max_matches: int | None = None) -> list[str]:
        """Return the lines matching ``pattern``, each prefixed with its 0-based index: ``"12:x"``.

        The pattern is searched in each line separately (the `regex` module, with ``re``
        syntax) and the whole search is stopped after `GREP_TIME_LIMIT` seconds; ``flags`` combines
        ``i`` (ignore case), ``m`` (multiline) and ``s`` (dot matches all).

        Raises:
            InvalidToolArgsError: the pattern is not a valid regular expression, a flag is not
                one of ``i``, ``m``, ``s``, or ``max_matches`` is below 1.
        """
        search = compile_grep(pattern, flags).search
        if max_matches is not None and _check_count(max_matches, "max_matches") == 0:
            raise InvalidToolArgsError("max_matches must be 1 or more", field="max_matches")
        limit = max_matches if max_matches is not None else -1
        found: list[str] = []
        base = 0
        budget = GREP_TIME_LIMIT + GREP_SECONDS_PER_MB * self.byte_length() / 1_000_000
        deadline = monotonic() + budget
        try:
            for batch in self._line_batches():
                remaining = deadline - monotonic()
                if remaining <= 0:
                    raise TimeoutError
                # compress/map keep the per-line loop in C; only matching lines reach Python.
                matches = map(partial(search, timeout=remaining), batch)
                for offset in compress(range(len(batch)), matches):
                    found.append(f"{base + offset}:{batch[offset]}")
                    if len(found) == limit:
                        return found
                base += len(batch)
        except TimeoutError:
            raise InvalidToolArgsError(
                f"the pattern {pattern!r} took longer than {budget:.1f} s to search; "
                "simplify it (overlapping alternatives such as (a|aa)+ backtrack catastrophically)",
                field="pattern",
            ) from None
        return found

    def _line_batches(self) -> Iterable[list[str]]:
        if self._batches is not None:
            return self._batches(0)
        return ([line] for line in self.lines())

    def cat(self, start: int | None = None, end: int | None = None) -> list[str]:
        """Return lines ``[start:end]`` with Python slice semantics (negative indexes count back).

        An empty or reversed range gives ``[]``.

        Raises:
            InvalidToolArgsError: ``start`` or ``end`` is neither an integer nor None.
        """
        start = _check_index(start, "start")
        end = _check_index(end, "end")
        if start is not None and start >= 0 and end is not None and end >= 0:
            return list(self.lines(start, end)) if end > start else []
        first, stop, _ = slice(start, end).indices(self._reader.line_count())
        return list(self.lines(first, stop)) if stop > first else []

    def byte_length(self) -> int:
        """Return the size of the body in bytes."""
        return self._reader.byte_length()

    def line_count(self) -> int:
        """Return the number of lines (a trailing newline ends with an empty line)."""
        return self._reader.line_count()

    def estimate_tokens(self, encoding: str = "cl100k_base") -> int:
        """Estimate the number of tokens of the body for ``encoding``.

        Exact when ``tiktoken`` is installed and the encoding's data is already cached locally
        (nothing is ever downloaded); otherwise a rough offline heuristic (see
        ``pipeline._tokens``), good for sizing decisions, not for billing. Above 4 MiB the
        heuristic reads eight evenly spaced windows of 512 lines and scales by byte length.

        Raises:
            InvalidToolArgsError: ``encoding`` is not one of the known encodings.
        """
        if encoding not in ENCODINGS:
            raise InvalidToolArgsError(
                f"unknown encoding {encoding!r}: use one of {', '.join(ENCODINGS)}",
                field="encoding",
            )
        size = self._reader.byte_length()
        if size <= _SAMPLE_ABOVE or exact_tokens_available(encoding):
            return estimate_tokens(self.lines(), encoding)
        count = self._reader.line_count()
        step = max(count // _WINDOWS, 1)
        tokens = sampled = 0
        for first in range(0, count, step)[:_WINDOWS]:
            window = list(self.lines(first, min(first + _WINDOW_LINES, count)))
            tokens += estimate_tokens(window, encoding)
            sampled += sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in window)
        return round(tokens * size / max(sampled, 1))

    def as_string(self) -> str:
        """Return the whole body as text."""
        return self._reader.read_all()

    @classmethod
    def all_tool_methods(cls) -> tuple[ToolMethod, ...]:
        """Return the tool methods of this class and its artifact bases, base methods first."""
        methods: list[ToolMethod] = []
        for klass in _artifact_mro(cls):
            methods.extend(own_tool_methods(klass))
        return tuple(methods)

    @classmethod
    def forge_tools(cls, ctx: ArtifactContext) -> ToolRegistry:
        """Build this turn's query tools for artifacts of this class (DESIGN 10.3).

        Returns an empty registry when the turn holds no artifact of this class.
        """
        return _forger[0](cls, ctx)

    def __repr__(self) -> str:
        """Return the class, byte length and line count."""
        return f"<{type(self).__name__} {self.byte_length()} bytes, {self.line_count()} lines>"


def _artifact_mro(cls: type[SpooledArtifact]) -> list[type[SpooledArtifact]]:
    """Return the artifact classes of ``cls``'s MRO, from `SpooledArtifact` down to ``cls``."""
    return [k for k in reversed(cls.__mro__) if issubclass(k, SpooledArtifact)]


def own_tool_methods(klass: type[SpooledArtifact]) -> tuple[ToolMethod, ...]:
    """Return the tool methods ``klass`` adds to its artifact bases (matched by name).

    A class may declare only its new methods or repeat its bases' (``Base.tool_methods + (...)``);
    either way only the new ones are its own.
    """
    declared: tuple[ToolMethod, ...] = klass.__dict__.get("tool_methods", ())
    if klass is SpooledArtifact:
        return declared
    inherited = {
        m.name
        for base in klass.__mro__[1:]
        if issubclass(base, SpooledArtifact)
        for m in base.__dict__.get("tool_methods", ())
    }
    return tuple(m for m in declared if m.name not in inherited)


SpooledArtifact.tool_methods = (
    ToolMethod(
        name="artifact_head",
        method="head",
        description="Return the first n lines of a spooled tool result.",
        args_schema=CountArgs,
    ),
    ToolMethod(
        name="artifact_tail",
        method="tail",
        description="Return the last n lines of a spooled tool result.",
        args_schema=CountArgs,
    ),
    ToolMethod(
        name="artifact_grep",
        method="grep",
        description=(
            "Search each line of a spooled tool result with a Python regular expression; "
            "returns the matching lines as 'INDEX:line' with 0-based line indexes."
        ),
        args_schema=GrepArgs,
    ),
    ToolMethod(
        name="artifact_cat",
        method="cat",
        description=(
            "Return lines [start:end] of a spooled tool result (0-based, end exclusive, "
            "negative indexes count from the end)."
        ),
        args_schema=CatArgs,
    ),
    ToolMethod(
        name="artifact_byte_length",
        method="byte_length",
        description="Return the size of a spooled tool result in bytes.",
        args_schema=NoArgs,
    ),
    ToolMethod(
        name="artifact_line_count",
        method="line_count",
        description="Return the number of lines of a spooled tool result.",
        args_schema=NoArgs,
    ),
    ToolMethod(
        name="artifact_estimate_tokens",
        method="estimate_tokens",
        description="Estimate how many tokens a spooled tool result would take in full.",
        args_schema=TokenArgs,
    ),
)


SpooledArtifact.__module__ = "pipeline"
