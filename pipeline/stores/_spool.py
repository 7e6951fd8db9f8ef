r"""The spool seam: where artifact bodies live, and the in-memory store.

A `SpoolStore` keeps the body of every spooled tool result under its call id and hands back a
`SpoolReader`. Readers are synchronous and line-oriented:

- lines split on ``"\n"`` only (a ``"\r"`` stays part of its line); a trailing newline gives a
  final empty line, so ``""`` has one line and ``"a\n"`` has two;
- bodies given as bytes are decoded as UTF-8 with ``errors="replace"`` (invalid sequences read
  back as U+FFFD); ``byte_length()`` counts the stored bytes (the UTF-8 encoding of a text body).

`MemorySpoolStore` is the default store. `FileSpoolStore` (in `pipeline._file_spool`) keeps bodies
on disk for results too large for memory.

Readers work through a large body in pieces of at most `PIECE` characters (or bytes): artifact
queries run in worker threads, and one C call over a 50 MB body (decoding it, counting or
splitting its lines) would hold the interpreter lock, keeping every other turn on the event loop
waiting, for tens of milliseconds.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from itertools import islice
from typing import Protocol, runtime_checkable

__all__ = [
    "PIECE",
    "MemorySpoolReader",
    "MemorySpoolStore",
    "SpoolReader",
    "SpoolStore",
    "count_lines",
    "split_lines",
    "utf8_length",
]

PIECE = 1 << 20
"""The most characters (or bytes) a reader hands to one C call (see the module docstring)."""


@runtime_checkable
class SpoolReader(Protocol):
    """Read access to one spooled body.

    This is the minimum an artifact needs. The readers of the built-in stores also offer
    ``iter_lines(start, end)`` and ``tail_lines(n)``, which artifacts use when present to stream
    instead of fetching line by line.
    """

    def line(self, i: int) -> str:
        """Return line ``i`` (0-based, without its newline); `IndexError` when out of range."""
        ...

    def byte_length(self) -> int:
        """Return the size of the stored body in bytes."""
        ...

    def line_count(self) -> int:
        """Return the number of lines (at least 1: the empty body has one empty line)."""
        ...

    def read_all(self) -> str:
        """Return the whole body as text."""
        ...


@runtime_checkable
class SpoolStore(Protocol):
    """Where artifact bodies are kept, keyed by call id. All methods are synchronous."""

    def write(self, id: str, data: str | bytes) -> SpoolReader:
        """Store ``data`` under ``id`` (replacing any earlier body) and return a reader over it."""
        ...

    def read(self, id: str) -> SpoolReader | None:
        """Return a reader over the body stored under ``id``, or None when there is none."""
        ...

    def delete(self, id: str) -> bool:
        """Forget the body under ``id``; return True when there was one."""
        ...


def decode(data: bytes) -> str:
    """Decode stored bytes the one way every reader does: UTF-8, invalid sequences replaced.

    Large bodies are decoded in pieces (an incremental decoder: a sequence cut by a piece's
    end decodes as it would whole).
    """
    if len(data) <= PIECE:
        return data.decode("utf-8", errors="replace")
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    view = memoryview(data)
    parts = [decoder.decode(view[i : i + PIECE]) for i in range(0, len(data), PIECE)]
    parts.append(decoder.decode(b"", final=True))
    return "".join(parts)


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` (split on newlines), in pieces of about `PIECE` characters."""
    if len(text) <= PIECE:
        return text.split("\n")
    lines: list[str] = []
    start, size = 0, len(text)
    while size - start > PIECE:
        cut = text.rfind("\n", start, start + PIECE)
        if cut >= 0:
            lines.extend(text[start:cut].split("\n"))
        else:  # a line longer than a piece: it ends at the next newline, or the text's end
            cut = text.find("\n", start + PIECE)
            if cut < 0:
                lines.append(text[start:])
                return lines
            lines.append(text[start:cut])
        start = cut + 1
    lines.extend(text[start:].split("\n"))
    return lines


def count_lines(text: str) -> int:
    """The number of lines of ``text`` (newlines plus one), counted in `PIECE`-sized pieces."""
    return sum(text.count("\n", i, i + PIECE) for i in range(0, len(text), PIECE)) + 1


def utf8_length(text: str) -> int:
    """The length of ``text`` encoded as UTF-8 (lone surrogates as three bytes), in pieces."""
    if text.isascii():  # O(1) on CPython: the common case never encodes
        return len(text)
    return sum(
        len(text[i : i + PIECE].encode("utf-8", "surrogatepass"))
        for i in range(0, len(text), PIECE)
    )


class MemorySpoolReader:
    """A reader over a body held in memory.

    Writing is cheap: the text is kept as given and the line list is built on the first call that
    needs random access to lines.
    """

    __slots__ = ("_byte_length", "_lines", "_text")

    def __init__(self, text: str, byte_length: int | None = None) -> None:
        """Wrap ``text``; ``byte_length`` is the size of the original bytes when known."""
        self._text = text
        self._byte_length = byte_length
        self._lines: list[str] | None = None

    def _split(self) -> list[str]:
        lines = self._lines
        if lines is None:
            lines = self._lines = split_lines(self._text)
        return lines

    def line(self, i: int) -> str:
        """Return line ``i`` (0-based); `IndexError` when out of range."""
        if i < 0:
            raise IndexError(f"line {i} out of range")
        return self._split()[i]

    def byte_length(self) -> int:
        """Return the size of the body in bytes (UTF-8)."""
        size = self._byte_length
        if size is None:
            size = self._byte_length = utf8_length(self._text)
        return size

    def line_count(self) -> int:
        """Return the number of lines."""
        lines = self._lines
        return len(lines) if lines is not None else count_lines(self._text)

    def read_all(self) -> str:
        """Return the whole body."""
        return self._text

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[str]:
        """Yield lines ``start`` to ``end`` (exclusive; None means to the last line)."""
        return islice(self._split(), start, end)

    def iter_line_batches(self, start: int = 0) -> Iterator[list[str]]:
        """Yield the lines from line ``start`` to the end in lists (here: one list)."""
        lines = self._split()
        yield lines if start == 0 else lines[start:]

    def tail_lines(self, n: int) -> list[str]:
        """Return the last ``n`` lines."""
        if n <= 0:
            return []
        return self._split()[-n:]

    def __repr__(self) -> str:
        """Return the size of the body."""
        return f"<MemorySpoolReader {len(self._text)} chars>"


class MemorySpoolStore:
    """A `SpoolStore` holding bodies in a dict. The default store."""

    __slots__ = ("_bodies",)

    def __init__(self) -> None:
        """Start empty."""
        self._bodies: dict[str, MemorySpoolReader] = {}

    def write(self, id: str, data: str | bytes) -> MemorySpoolReader:
        """Store ``data`` under ``id`` and return its reader (bytes are decoded once, here)."""
        if isinstance(data, str):
            reader = MemorySpoolReader(data)
        elif isinstance(data, bytes | bytearray | memoryview):
            raw = bytes(data)
            reader = MemorySpoolReader(decode(raw), len(raw))
        else:
            raise TypeError(f"spool data must be str or bytes, not {type(data).__name__}")
        self._bodies[id] = reader
        return reader

    def read(self, id: str) -> MemorySpoolReader | None:
        """Return the reader stored under ``id``, or None."""
        return self._bodies.get(id)

    def delete(self, id: str) -> bool:
        """Forget the body under ``id``; return True when there was one."""
        return self._bodies.pop(id, None) is not None

    def __len__(self) -> int:
        """Return the number of stored bodies."""
        return len(self._bodies)

    def __contains__(self, id: object) -> bool:
        """Return True when a body is stored under ``id``."""
        return id in self._bodies

    def __repr__(self) -> str:
        """Return the number of stored bodies."""
        return f"MemorySpoolStore({len(self._bodies)} bodies)"


SpoolReader.__module__ = "pipeline.stores"
SpoolStore.__module__ = "pipeline.stores"
MemorySpoolStore.__module__ = "pipeline.stores"
