r"""The spool seam: where artifact bodies live, and the in-memory store.

A `SpoolStore` keeps the body of every spooled tool result under its call id and hands back a
`SpoolReader`. Readers are synchronous and line-oriented:

- lines split on ``"\n"`` only (a ``"\r"`` stays part of its line); a trailing newline gives a
  final empty line, so ``""`` has one line and ``"a\n"`` has two;
- bodies given as bytes are decoded as UTF-8 with ``errors="replace"`` (invalid sequences read
  back as U+FFFD); ``byte_length()`` counts the stored bytes (the UTF-8 encoding of a text body).

`MemorySpoolStore` is the default store. `FileSpoolStore` (in `pipeline._file_spool`) keeps bodies
on disk for results too large for memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Protocol, runtime_checkable

__all__ = ["MemorySpoolReader", "MemorySpoolStore", "SpoolReader", "SpoolStore"]


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
    """Decode stored bytes the one way every reader does: UTF-8, invalid sequences replaced."""
    return data.decode("utf-8", errors="replace")


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
            lines = self._lines = self._text.split("\n")
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
            text = self._text
            # isascii() is O(1) on CPython strings, so the common case never encodes.
            size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            self._byte_length = size
        return size

    def line_count(self) -> int:
        """Return the number of lines."""
        lines = self._lines
        return len(lines) if lines is not None else self._text.count("\n") + 1

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
