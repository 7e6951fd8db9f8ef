"""Capped renderers of the line tools (``artifact_head``, ``tail``, ``cat``, ``grep``).

Each streams lines from the artifact and stops once the next line would pass the cap (see
``_cap.py``); the note names the line range to ask for next. Without a cap the text is what
`default_serialise` makes of the method's list (newline-joined, ``(empty list)`` when empty).

The renderers read an artifact through `LineQueries`, the part of `SpooledArtifact`'s API they
use: the artifact class names its tool methods (and so these renderers), so the renderers do not
name the class back (docs/architecture.md, "The layers").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from ._cap import clip, content_budget, finish, utf8_len

__all__ = ["LineQueries", "capped_cat", "capped_grep", "capped_head", "capped_tail"]

_EMPTY = "(empty list)"


class LineQueries(Protocol):
    """What the line tools' renderers read of an artifact; every `SpooledArtifact` has it."""

    def lines(self, start: int = 0, end: int | None = None) -> Iterator[str]:
        """Yield lines ``start`` to ``end`` (exclusive; None: to the end), streaming."""
        ...

    def line_range(
        self, start: int | None = None, end: int | None = None
    ) -> tuple[int, int | None]:
        """Return the ``(first, stop)`` line indexes ``cat`` reads for ``start`` and ``end``."""
        ...

    def byte_length(self) -> int:
        """Return the size of the body in bytes."""
        ...

    def line_count(self) -> int:
        """Return the number of lines."""
        ...

    def iter_grep(
        self,
        pattern: str,
        flags: str = "",
        start_line: int = 0,
        end_line: int | None = None,
        max_matches: int | None = None,
    ) -> Iterator[tuple[int, str]]:
        """Yield ``(index, line)`` for each matching line, streaming, under grep's deadline."""
        ...


def _lines(lines: Iterable[str], first: int, cap: int, more: Callable[[int], str]) -> str:
    """Join ``lines`` (the first has index ``first``) within ``cap``; ``more(k)``: the advice."""
    budget = content_budget(cap)
    shown: list[str] = []
    used = 0
    index = first
    for line in lines:
        size = utf8_len(line) + 1
        if used + size > budget:
            if not shown:
                return finish(
                    clip(line, budget),
                    f"[output capped at {cap:,} bytes: line {index} alone is {size - 1:,} bytes "
                    f"and was cut (artifact_grep can search it); {more(index + 1)}]",
                    cap,
                )
            return finish(
                "\n".join(shown),
                f"[output capped at {cap:,} bytes: lines {first}-{index - 1} shown; "
                f"{more(index)}]",
                cap,
            )
        shown.append(line)
        used += size
        index += 1
    return "\n".join(shown) if shown else _EMPTY


def _cat_advice(stop: int | None) -> Callable[[int], str]:
    bound = "" if stop is None else f", end={stop}"
    return lambda k: f"read the rest with artifact_cat(start={k}{bound})"


def capped_cat(
    artifact: LineQueries, cap: int, start: int | None = None, end: int | None = None
) -> str:
    """Render ``artifact.cat(start, end)`` within ``cap`` bytes."""
    first, stop = artifact.line_range(start, end)
    if stop is not None and stop <= first:
        return _EMPTY
    return _lines(artifact.lines(first, stop), first, cap, _cat_advice(stop))


def capped_head(artifact: LineQueries, cap: int, n: int = 10) -> str:
    """Render ``artifact.head(n)`` within ``cap`` bytes."""
    if n <= 0:
        return _EMPTY
    return _lines(artifact.lines(0, n), 0, cap, _cat_advice(n))


def capped_tail(artifact: LineQueries, cap: int, n: int = 10) -> str:
    """Render ``artifact.tail(n)`` within ``cap`` bytes: the last lines that fit, and a note."""
    if n <= 0 or artifact.byte_length() == 0:
        return _EMPTY
    count = artifact.line_count()
    first = max(0, count - n)
    budget = content_budget(cap)
    kept: deque[str] = deque()
    used = 0
    for line in artifact.lines(first, count):
        kept.append(line)
        used += utf8_len(line) + 1
        while used > budget and len(kept) > 1:
            used -= utf8_len(kept.popleft()) + 1
    start = count - len(kept)
    if start == first and used <= budget:
        return "\n".join(kept)
    if used > budget:  # one line, longer than the cap
        line = kept[0]
        return finish(
            clip(line, budget),
            f"[output capped at {cap:,} bytes: line {count - 1} alone is {utf8_len(line):,} "
            f"bytes and was cut; read lines {first}-{count - 2} with artifact_cat(start={first}, "
            f"end={count - 1})]",
            cap,
        )
    return finish(
        "\n".join(kept),
        f"[output capped at {cap:,} bytes: the last {len(kept):,} lines ({start}-{count - 1}) "
        f"shown; read lines {first}-{start - 1} with artifact_cat(start={first}, end={start})]",
        cap,
    )


def _grep_again(line: int) -> str:
    return f"continue with artifact_grep(start_line={line}) and the same pattern and flags"


def capped_grep(
    artifact: LineQueries,
    cap: int,
    pattern: str,
    flags: str = "",
    max_matches: int | None = None,
    start_line: int = 0,
    end_line: int | None = None,
) -> str:
    """Render ``artifact.grep(...)`` within ``cap`` bytes; the note says where to go on from."""
    budget = content_budget(cap)
    shown: list[str] = []
    used = 0
    limit = -1 if max_matches is None else max_matches
    for index, line in artifact.iter_grep(pattern, flags, start_line, end_line, max_matches):
        text = f"{index}:{line}"
        size = utf8_len(text) + 1
        if used + size > budget:
            if not shown:
                return finish(
                    clip(text, budget),
                    f"[output capped at {cap:,} bytes: the matching line {index} alone is "
                    f"{size - 1:,} bytes and was cut; {_grep_again(index + 1)}]",
                    cap,
                )
            last = shown[-1].split(":", 1)[0]
            return finish(
                "\n".join(shown),
                f"[output capped at {cap:,} bytes: {len(shown):,} matching lines shown, the "
                f"last on line {last}; {_grep_again(index)}]",
                cap,
            )
        shown.append(text)
        used += size
        if len(shown) == limit:
            break
    return "\n".join(shown) if shown else _EMPTY
