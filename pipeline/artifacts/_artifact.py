"""`SpooledArtifact`: a large tool result kept in a spool store and queried by line.

Line numbers everywhere in the artifact API (``grep`` prefixes, ``cat`` indexes, Markdown
records) are 0-based line indexes, the same indexes ``cat`` and ``SpoolReader.line`` take, so a
line number from one query can be fed to ``cat`` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from time import monotonic
from typing import TYPE_CHECKING, ClassVar, Protocol

from ..errors import InvalidToolArgsError, NotASpoolReaderError
from ._cap import DEFAULT_MAX_RESULT_BYTES
from ._toolmethod import DeferredToolMethods, ToolMethod, declared_tool_methods

if TYPE_CHECKING:
    # `forge_tools` returns a ToolRegistry (its public type), and its context hands out records:
    # the one place an artifact names what sits above it (docs/architecture.md, "The layers").
    from .._registry import ToolRegistry
    from ..calls._toolcall import ToolCall
    from ..stores._spool import SpoolReader
    from ._grep import GrepPattern

__all__ = ["ArtifactContext", "SpooledArtifact", "install_forger", "own_tool_methods"]


class ArtifactContext(Protocol):
    """What forging and forged handlers need of a context; `DispatchContext` satisfies it."""

    def artifact_call_ids(self, cls: type[SpooledArtifact]) -> list[str]:
        """Ids of this turn's stored calls whose result is an artifact of ``cls``."""
        ...

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        """The stored call with ``call_id``, or None."""
        ...


Forger = Callable[[type["SpooledArtifact"], ArtifactContext], "ToolRegistry"]
"""Builds the query tools of an artifact class for a turn (``pipeline/artifacts/_forge.py``)."""

_forger: list[Forger] = []


def install_forger(forger: Forger) -> None:
    """Plug in the forging of query tools (done once, by ``_forge`` as it is imported).

    Forging builds `Tool` s, and a `Tool` knows the `SpooledArtifact` class its results are
    wrapped in; handing the forger in here keeps that pair of modules free of an import loop.
    """
    _forger[:] = [forger]


_READER_METHODS = ("line", "byte_length", "line_count", "read_all")
_SAMPLE_ABOVE = 4 << 20
_WINDOWS = 8
_WINDOW_LINES = 512


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
    """The query methods offered to the model (docs/concepts/artifacts.md)."""

    max_result_bytes: ClassVar[int] = DEFAULT_MAX_RESULT_BYTES
    """The most a query tool returns to the model, in UTF-8 bytes (32 KiB; at least 1 KiB).

    A longer result is cut where it streams and ends with a note saying how to read the rest
    (the next line range, offset or start line). Set it on a subclass (or on this class, for
    every artifact) to change it."""

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
        if self._is_empty():
            return iter(())
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
        if n == 0 or self._is_empty():
            return []
        if self._tail_lines is not None:
            return self._tail_lines(n)
        count = self._reader.line_count()
        return list(self.lines(max(0, count - n), count))

    def grep(
        self,
        pattern: str,
        flags: str = "",
        max_matches: int | None = None,
        start_line: int = 0,
        end_line: int | None = None,
    ) -> list[str]:
        """Return the lines matching ``pattern``, each prefixed with its 0-based index: ``"12:x"``.

        The pattern is searched in each line separately (``re`` syntax); ``flags`` combines
        ``i`` (ignore case), ``m`` (multiline), ``s`` (dot matches all) and ``u`` (Unicode:
        accepted, always on). Only lines ``start_line`` to ``end_line`` (exclusive; None: to the
        end) are searched. The whole search must end within `grep_time_limit` seconds: past
        that deadline it stops with an error and returns nothing.

        Raises:
            InvalidToolArgsError: the pattern is not a valid regular expression, a flag is not
                one of ``i``, ``m``, ``s``, ``u``, ``max_matches`` is below 1, a line bound is
                not an integer >= 0, or the search did not end within the time limit.
        """
        matches = self.iter_grep(pattern, flags, start_line, end_line, max_matches)
        return [f"{index}:{line}" for index, line in matches]

    def iter_grep(
        self,
        pattern: str,
        flags: str = "",
        start_line: int = 0,
        end_line: int | None = None,
        max_matches: int | None = None,
    ) -> Iterator[tuple[int, str]]:
        """Yield ``(index, line)`` for each matching line, streaming, under `grep`'s deadline.

        The arguments are checked at once; the deadline starts with the first ``next``.

        Raises:
            InvalidToolArgsError: as `grep`.
        """
        from ._grep import compile_grep  # grep and tokens load on first use (docs/architecture.md)

        compiled = compile_grep(pattern, flags)
        if max_matches is not None and _check_count(max_matches, "max_matches") == 0:
            raise InvalidToolArgsError("max_matches must be 1 or more", field="max_matches")
        start = _check_count(start_line, "start_line")
        end = _check_index(end_line, "end_line")
        if end is not None and end < 0:
            raise InvalidToolArgsError("end_line must be 0 or more", field="end_line")
        return self._grep_lines(compiled, start, end, max_matches)

    def _grep_lines(
        self, compiled: GrepPattern, start: int, end: int | None, max_matches: int | None
    ) -> Iterator[tuple[int, str]]:
        from ._grep import grep_timeout_error, iter_matches

        budget = self.grep_time_limit()
        deadline = monotonic() + budget
        count = 0
        try:
            for index, line in iter_matches(
                compiled, self._line_batches(start, end), deadline=deadline, first=start
            ):
                yield index, line
                count += 1
                if count == max_matches:
                    return
        except TimeoutError:
            raise grep_timeout_error(compiled.pattern, budget) from None

    def grep_time_limit(self) -> float:
        """Return the seconds a `grep` of this body may take.

        That is `GREP_TIME_LIMIT` plus `GREP_SECONDS_PER_MB` per megabyte of body.
        """
        from ._grep import grep_budget

        return grep_budget(self.byte_length())

    def _line_batches(self, start: int = 0, end: int | None = None) -> Iterable[list[str]]:
        if self._is_empty() or (end is not None and end <= start):
            return ()
        if self._batches is not None:
            batches: Iterable[list[str]] = self._batches(start)
        else:
            lines = self.lines(start, end)
            batches = iter(lambda: list(islice(lines, 4096)), [])
        return batches if end is None else _until(batches, end - start)

    def cat(self, start: int | None = None, end: int | None = None) -> list[str]:
        """Return lines ``[start:end]`` with Python slice semantics (negative indexes count back).

        An empty or reversed range gives ``[]``.

        Raises:
            InvalidToolArgsError: ``start`` or ``end`` is neither an integer nor None.
        """
        first, stop = self.line_range(start, end)
        if stop is not None and stop <= first:
            return []
        return list(self.lines(first, stop))

    def line_range(
        self, start: int | None = None, end: int | None = None
    ) -> tuple[int, int | None]:
        """Return the ``(first, stop)`` line indexes `cat` reads for ``start`` and ``end``.

        ``stop`` is None for "to the end" when no bound is negative (the line count is then
        not needed); the range is empty when ``stop <= first``.

        Raises:
            InvalidToolArgsError: ``start`` or ``end`` is neither an integer nor None.
        """
        start = _check_index(start, "start")
        end = _check_index(end, "end")
        if (start is None or start >= 0) and (end is None or end >= 0):
            return start or 0, end
        first, stop, _ = slice(start, end).indices(self.line_count())
        return first, stop

    def byte_length(self) -> int:
        """Return the size of the body in bytes."""
        return self._reader.byte_length()

    def line_count(self) -> int:
        """Return the number of lines.

        An empty body has 0 lines; otherwise a body ending in a newline ends with an empty
        line (``a``, newline is two lines; ``a`` alone is one).
        """
        return 0 if self._is_empty() else self._reader.line_count()

    def _is_empty(self) -> bool:
        return self._reader.byte_length() == 0

    def estimate_tokens(self, encoding: str = "cl100k_base") -> int:
        """Estimate the number of tokens of the body for ``encoding``.

        Exact when ``tiktoken`` is installed and the encoding's data is already cached locally
        (nothing is ever downloaded); otherwise a rough offline heuristic (see
        ``pipeline._tokens``), good for sizing decisions, not for billing. Above 4 MiB the
        heuristic reads eight evenly spaced windows of 512 lines and scales by byte length.

        Raises:
            InvalidToolArgsError: ``encoding`` is not one of the known encodings.
        """
        from ._tokens import ENCODINGS, estimate_tokens, exact_tokens_available

        if encoding not in ENCODINGS:
            raise InvalidToolArgsError(
                f"unknown encoding {encoding!r}: use one of {', '.join(ENCODINGS)}",
                field="encoding",
            )
        size = self._reader.byte_length()
        if size <= _SAMPLE_ABOVE or exact_tokens_available(encoding):
            return estimate_tokens(self.lines(), encoding)
        count = self.line_count()
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
        """Build this turn's query tools for artifacts of this class.

        Holds the tools of this class and of each artifact base with instances in the turn
        (the base tools even when the turn has no artifact of this class); empty when the turn
        holds no artifact of this class or its bases.
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
    declared = declared_tool_methods(klass)
    if klass is SpooledArtifact:
        return declared
    inherited = {
        m.name
        for base in klass.__mro__[1:]
        if issubclass(base, SpooledArtifact)
        for m in declared_tool_methods(base)
    }
    return tuple(m for m in declared if m.name not in inherited)


def _until(batches: Iterable[list[str]], count: int) -> Iterator[list[str]]:
    """Yield the batches' lines up to ``count`` lines in all."""
    for batch in batches:
        if len(batch) >= count:
            if count:
                yield batch[:count]
            return
        count -= len(batch)
        yield batch


def _base_tool_methods() -> tuple[ToolMethod, ...]:
    from ._base_tools import BASE_TOOL_METHODS

    return BASE_TOOL_METHODS


# Built when first read: the argument models load pydantic's model machinery (docs/
# architecture.md, "Import time"). Reads see the tuple; mypy sees the ClassVar declared above.
SpooledArtifact.tool_methods = DeferredToolMethods(_base_tool_methods)  # type: ignore[assignment]


SpooledArtifact.__module__ = "pipeline.artifacts"
