"""`FileSpoolStore`: artifact bodies on disk, read by streaming.

Each body is one file named after the SHA-256 of its call id (any id is safe as a file name).
Readers never load a whole body to answer a line query:

- ``head``/``iter_lines`` from line 0 just stream;
- ``line_count`` and any access that starts past line 0 use a sparse index built lazily in one
  streaming pass: the number of newlines before each 64 KiB block (8 bytes per block, so about
  25 KiB for a 200 MB body); a line is then found by seeking to its block and scanning it;
- ``tail_lines`` seeks from the end and reads backwards block by block.

Only a single line longer than the memory you have would be a problem: lines are returned whole.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from pathlib import Path
from typing import BinaryIO

from ..errors import InvalidRunnerConfigError
from ._spool import decode

__all__ = ["FileSpoolReader", "FileSpoolStore"]

_BLOCK = 1 << 16
_READ = 1 << 20  # a multiple of _BLOCK
_NL = b"\n"


class FileSpoolReader:
    """A streaming reader over one spool file. Safe to share; each call opens the file itself."""

    __slots__ = ("_index", "_path", "_size")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open a reader over the file at ``path`` (which must exist)."""
        self._path = Path(path)
        self._size = self._path.stat().st_size
        self._index: array[int] | None = None

    @property
    def path(self) -> Path:
        """The file holding the body."""
        return self._path

    def _block_index(self) -> array[int]:
        """Return ``index`` with ``index[k]`` = newlines before block ``k`` (one pass, cached)."""
        index = self._index
        if index is not None:
            return index
        index = array("q", [0])
        total = 0
        buffer = bytearray(_READ)
        view = memoryview(buffer)
        with self._path.open("rb") as handle:
            while True:
                got = handle.readinto(buffer)
                if not got:
                    break
                for start in range(0, got, _BLOCK):
                    total += buffer.count(_NL, start, min(start + _BLOCK, got))
                    index.append(total)
        view.release()
        self._index = index
        return index

    def _line_start(self, handle: BinaryIO, i: int) -> int:
        """Return the byte offset where line ``i`` starts (``0 < i < line_count``)."""
        index = self._block_index()
        block = bisect_left(index, i) - 1  # index[block] < i <= index[block + 1]
        handle.seek(block * _BLOCK)
        data = handle.read(_BLOCK)
        pos = -1
        for _ in range(i - index[block]):
            pos = data.find(_NL, pos + 1)
        return block * _BLOCK + pos + 1

    def _batches_from(self, handle: BinaryIO, offset: int) -> Iterator[list[str]]:
        """Yield the lines from byte ``offset`` (a line start) to the end, in batches.

        Reads start at one block and double up to 1 MiB, so a short query reads little and a
        long scan decodes large chunks at once (newlines never occur inside a UTF-8 sequence,
        so decoding whole runs of lines equals decoding line by line).
        """
        handle.seek(offset)
        size = _BLOCK
        carry = b""
        while True:
            data = handle.read(size)
            size = min(size * 2, _READ)
            if not data:
                yield [decode(carry)]  # the last line: empty when the body ends with \n
                return
            if carry:
                data = carry + data
            cut = data.rfind(_NL)
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            yield str(memoryview(data)[:cut], "utf-8", "replace").split("\n")

    def iter_line_batches(self, start: int = 0) -> Iterator[list[str]]:
        """Yield the lines from line ``start`` to the end in lists (for fast scans)."""
        if start < 0:
            return
        with self._path.open("rb") as handle:
            if start == 0:
                offset = 0
            else:
                if start >= self.line_count():
                    return
                offset = self._line_start(handle, start)
            yield from self._batches_from(handle, offset)

    def iter_lines(self, start: int = 0, end: int | None = None) -> Iterator[str]:
        """Yield lines ``start`` to ``end`` (0-based, end exclusive; None: to the last line)."""
        if start < 0 or (end is not None and end <= start):
            return
        lines = chain.from_iterable(self.iter_line_batches(start))
        yield from lines if end is None else islice(lines, end - start)

    def line(self, i: int) -> str:
        """Return line ``i`` (0-based); `IndexError` when out of range."""
        if i < 0 or (i > 0 and i >= self.line_count()):
            raise IndexError(f"line {i} out of range")
        with self._path.open("rb") as handle:
            offset = 0 if i == 0 else self._line_start(handle, i)
            handle.seek(offset)
            raw = handle.readline()
        return decode(raw[:-1] if raw.endswith(_NL) else raw)

    def tail_lines(self, n: int) -> list[str]:
        """Return the last ``n`` lines, reading backwards from the end of the file."""
        if n <= 0:
            return []
        found = 0
        offset = 0
        with self._path.open("rb") as handle:
            end = self._size
            while end > 0 and found < n:
                begin = max(0, end - _BLOCK)
                handle.seek(begin)
                data = handle.read(end - begin)
                pos = len(data)
                while found < n:
                    pos = data.rfind(_NL, 0, pos)
                    if pos < 0:
                        break
                    found += 1
                    if found == n:
                        offset = begin + pos + 1
                end = begin
            return list(chain.from_iterable(self._batches_from(handle, offset)))

    def byte_length(self) -> int:
        """Return the size of the body in bytes."""
        return self._size

    def line_count(self) -> int:
        """Return the number of lines (builds the block index on first use)."""
        return self._block_index()[-1] + 1

    def read_all(self) -> str:
        """Return the whole body as text (this one does load it)."""
        return decode(self._path.read_bytes())

    def __repr__(self) -> str:
        """Return the file and its size."""
        return f"<FileSpoolReader {str(self._path)!r} {self._size} bytes>"


class FileSpoolStore:
    """A `SpoolStore` keeping each body in a file under ``directory`` (created if missing).

    Writes are atomic (a temporary file renamed into place), so a reader never sees half a body.
    """

    __slots__ = ("_dir", "_readers")

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        """Use ``directory`` for the bodies.

        Raises:
            InvalidRunnerConfigError: ``directory`` is not a path, or it cannot be created or
                used as a directory (a file is in the way, no permission).
        """
        given: object = directory  # checked at run time whatever the annotation says
        if not isinstance(given, str | os.PathLike) or not os.fspath(given):
            raise InvalidRunnerConfigError(
                f"FileSpoolStore: directory must be a non-empty str or path, got {directory!r}",
                field="spool",
            )
        self._dir = Path(directory)
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidRunnerConfigError(
                f"FileSpoolStore: cannot use {str(self._dir)!r} as its directory: {exc}",
                field="spool",
            ) from exc
        self._readers: dict[str, FileSpoolReader] = {}

    @property
    def directory(self) -> Path:
        """Where the bodies are kept."""
        return self._dir

    def path_for(self, id: str) -> Path:
        """Return the file that holds (or would hold) the body of ``id``."""
        return self._dir / (
            hashlib.sha256(id.encode("utf-8", "surrogatepass")).hexdigest() + ".spool"
        )

    def write(self, id: str, data: str | bytes) -> FileSpoolReader:
        """Store ``data`` under ``id`` (text is written as UTF-8) and return its reader."""
        if not isinstance(data, str | bytes | bytearray | memoryview):
            raise TypeError(f"spool data must be str or bytes, not {type(data).__name__}")
        return self.write_chunks(id, (data,))

    def write_chunks(self, id: str, chunks: Iterable[str | bytes]) -> FileSpoolReader:
        """Store the concatenation of ``chunks`` under ``id``, streaming, and return its reader.

        Use it for bodies that should never be held in memory whole.
        """
        target = self.path_for(id)
        fd, temp = tempfile.mkstemp(dir=self._dir, prefix=".tmp-", suffix=".spool")
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    if isinstance(chunk, str):
                        handle.write(chunk.encode("utf-8", "surrogatepass"))
                    elif isinstance(chunk, bytes | bytearray | memoryview):
                        handle.write(chunk)
                    else:
                        raise TypeError(
                            f"spool data must be str or bytes, not {type(chunk).__name__}"
                        )
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        reader = self._readers[id] = FileSpoolReader(target)
        return reader

    def read(self, id: str) -> FileSpoolReader | None:
        """Return a reader over the body of ``id``, or None when there is none."""
        reader = self._readers.get(id)
        if reader is not None and reader.path.exists():
            return reader
        target = self.path_for(id)
        if not target.is_file():
            self._readers.pop(id, None)
            return None
        reader = self._readers[id] = FileSpoolReader(target)
        return reader

    def delete(self, id: str) -> bool:
        """Delete the body of ``id``; return True when there was one."""
        self._readers.pop(id, None)
        try:
            self.path_for(id).unlink()
        except FileNotFoundError:
            return False
        return True

    def __contains__(self, id: object) -> bool:
        """Return True when a body is stored under ``id``."""
        return isinstance(id, str) and self.path_for(id).is_file()

    def __repr__(self) -> str:
        """Return the directory."""
        return f"FileSpoolStore({str(self._dir)!r})"


FileSpoolStore.__module__ = "pipeline.stores"
