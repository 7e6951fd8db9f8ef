"""`JsonlAuditSink`: an audit chain in a JSON Lines file (see ``middleware/audit/_sqlite.py``).

A row is a complete line. A writer killed in the middle of an append (SIGKILL, a crash) can
leave a torn tail: bytes after the last newline. The next sink to write (on opening, or before
an append when another process grew the file) cuts that tail and appends a ``"repair"`` row
recording where it was, how long, its SHA-256 and (up to `KEPT_BYTES`) the bytes themselves,
so the chain goes on and verifies. Reads (``rows()``, ``verify()``) never count a tail that has
no newline. The cut is reported once, by that row; nothing is hidden by it: a torn row that had
already been acknowledged (counted in ``<path>.head``) stays a missing row for ``verify()``, and
a damaged line before the tail is reported as before.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from pipeline.errors import InvalidMiddlewareConfigError

from ._anchor import AuditAnchor, check_anchor
from ._chain import (
    GENESIS_HASH,
    OPTIONAL_FIELDS,
    AuditEntry,
    AuditHead,
    AuditRow,
    entry_from_fields,
)
from ._jsonl_file import (
    file_size,
    last_line,
    locked,
    repair_entry,
    tail_start,
    try_lock,
    unlock,
    write_all,
)
from ._key import AuditKey, Digest, check_chain_key, check_key, row_digest, sealed
from ._report import AuditVerification
from ._seal import canonical_row, new_head, new_row
from ._sqlite import Synchronous, check_options
from ._sqlite_schema import SQL_COLUMNS, resume
from ._verify import verify_log
from ._writer import ChainWriter

__all__ = ["JsonlAuditSink"]

_HEAD_SIZE = 128  # bytes of the head record: {"count": ..., "hash": ...} padded with spaces
_SEALED_HEAD_SIZE = 256  # a keyed log's: {"count": ..., "hash": ..., "seal": ...}
_sync = getattr(os, "fdatasync", os.fsync)  # data and size are enough to read appended rows
_write_all = write_all  # (looked up here on every append: the tests count the writes)

_JSON_KEYS = frozenset((*SQL_COLUMNS, "index", "prev_hash", "hash")) - set(OPTIONAL_FIELDS)
"""The keys every line has; a line has the `OPTIONAL_FIELDS` too when they are set."""
_ALL_KEYS = _JSON_KEYS | set(OPTIONAL_FIELDS)

def _json_row(line: bytes) -> AuditRow | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not _JSON_KEYS <= data.keys() <= _ALL_KEYS:
        return None
    index, prev_hash, digest = data.pop("index"), data.pop("prev_hash"), data.pop("hash")
    if type(index) is not int or not isinstance(prev_hash, str) or not isinstance(digest, str):
        return None
    try:
        return AuditRow(index, entry_from_fields(data), prev_hash, digest)
    except ValueError:
        return None


def _chain_lines(
    entries: Sequence[AuditEntry], head: AuditHead, hash_of: Digest
) -> tuple[list[AuditRow], bytes]:
    """Chain ``entries`` after ``head``; return the rows and their lines, each built once.

    A line is the canonical JSON its hash is taken of (by ``hash_of``: unkeyed or keyed) with
    the ``hash`` key added at the end: reading it back gives the same fields (key order does not
    matter to `_json_row`).
    """
    index, prev = head.count, head.hash
    if len(entries) == 1:
        data = canonical_row(entries[0], index, prev)
        digest = hash_of(data)
        line = b'%s,"hash":"%s"}\n' % (data[:-1], digest.encode("ascii"))
        return [new_row(index, entries[0], prev, digest)], line
    rows: list[AuditRow] = []
    lines: list[bytes] = []
    for entry in entries:
        data = canonical_row(entry, index, prev)
        digest = hash_of(data)
        rows.append(new_row(index, entry, prev, digest))
        lines.append(b'%s,"hash":"%s"}\n' % (data[:-1], digest.encode("ascii")))
        index, prev = index + 1, digest
    return rows, b"".join(lines)


class JsonlAuditSink:
    """An audit chain in a JSON Lines file, one row per line, with a ``<path>.head`` file.

    Args:
        path: The file (created when missing; appended to otherwise). Several sinks, in this
            process or others, may share it: appends take an exclusive ``flock`` on
            ``<path>.head`` and chain after the rows already there (not on Windows).
        synchronous: ``"full"`` (default: ``fdatasync`` after every append, on the sink's
            writer thread) or ``"normal"`` (the append's ``write`` is made at once, on the
            calling thread, unless it would wait for another writer's lock; see
            ``middleware/audit/_writer.py``).
        key: Chain the rows under this key (``middleware/audit/_key.py``): only its holder
            can write rows that verify, and ``<path>.head`` is sealed with it, so a cut tail is
            found without a head saved elsewhere. A log stays in the mode it was started in.
        anchor: Also hand every new head to this callable (`AuditAnchorFile`, ``print``):
            a head kept out of the log's reach catches a rollback of the whole log.

    The chain's head is kept in memory, read from the files on opening and again whenever
    another writer grew the file. ``<path>.head`` is rewritten after every append (after the
    rows are written and, with ``"full"``, synced: one ``fdatasync`` per append); with
    ``"full"`` it is synced on ``close()``. So after a power loss it may lag behind the rows but
    never runs ahead of them, which `verify` accepts; every acknowledged row is on disk.

    Raises:
        InvalidMiddlewareConfigError: a bad option or a file that cannot be opened.
        AuditKeyError: ``key`` is not an `AuditKey`.
        AuditKeyMismatchError: the log was chained under another key, or in the other mode.
    """

    __slots__ = (
        "_anchor",
        "_fd",
        "_file",
        "_fsync",
        "_hash_of",
        "_head",
        "_head_fd",
        "_head_path",
        "_key",
        "_path",
        "_size",
        "_writer",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "full",
        key: AuditKey | None = None,
        anchor: AuditAnchor | None = None,
    ) -> None:
        """Open (or create) the file; see the class docstring."""
        self._path = check_options("JsonlAuditSink", path, synchronous)
        self._key = check_key("JsonlAuditSink", key)
        self._anchor = check_anchor("JsonlAuditSink", anchor)
        self._hash_of = row_digest(self._key)
        self._head_path = self._path + ".head"
        self._fsync = synchronous == "full"
        self._head = AuditHead(0, GENESIS_HASH)
        self._head_fd = -1
        self._fd = -1
        self._size = 0
        self._writer = ChainWriter(
            "loopware-audit", self._write, None if self._fsync else self._try_write
        )
        try:
            self._file = self._writer.call(self._open)
        except OSError as exc:
            self._writer.close(lambda: None)
            raise InvalidMiddlewareConfigError(
                f"JsonlAuditSink: cannot open {self._path!r}: {exc}"
            ) from exc
        self._fd = self._file.fileno()

    def __repr__(self) -> str:
        """Show the file and the number of rows appended so far."""
        return f"JsonlAuditSink({self._path!r}, rows={self._head.count})"

    def _open(self) -> Any:
        handle = open(self._path, "ab+")  # noqa: SIM115 - kept open for the sink's lifetime
        try:
            self._head_fd = os.open(self._head_path, os.O_RDWR | os.O_CREAT, 0o644)
            with locked(self._head_fd):
                check_chain_key("JsonlAuditSink", self._key, self._read_head(handle))
                self._catch_up(handle)
                if self._key is not None and self._head.count == 0 and self._size == 0:
                    self._write_head(self._head)  # a new keyed log: its end is sealed at once
        except BaseException:
            handle.close()
            if self._head_fd >= 0:
                os.close(self._head_fd)
                self._head_fd = -1
            raise
        return handle

    def _catch_up(self, handle: Any) -> None:
        """Find where the chain ends now, first cutting and recording a torn tail (locked)."""
        repair = self._cut_torn_tail(handle)
        self._head = self._read_head(handle)
        self._size = os.fstat(handle.fileno()).st_size
        if repair is not None:
            self._append_locked(handle.fileno(), [repair])

    def _cut_torn_tail(self, handle: Any) -> AuditEntry | None:
        """Cut the bytes after the last newline (a killed writer's unfinished append)."""
        size = handle.seek(0, os.SEEK_END)
        if not size:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        offset = tail_start(handle, size)
        handle.seek(offset)
        torn = handle.read(size - offset)
        os.ftruncate(handle.fileno(), offset)
        if self._fsync:
            _sync(handle.fileno())
        return repair_entry(offset, torn)

    def _read_head(self, handle: Any) -> AuditHead:
        """Where the next row goes, as the files hold it now (the file ends with a newline).

        With a key, a head file the key did not seal is no head: the rows then continue one
        index past the last row, so that ``verify()`` keeps reporting the end as lost.
        """
        row: AuditRow | None = None
        if handle.seek(0, os.SEEK_END):
            line = last_line(self._path)
            row = None if line is None else _json_row(line)
            if row is None:  # damaged last row: continue after the last row that parses
                for candidate in self._iter_rows():
                    row = candidate or row
        last = None if row is None else AuditHead(row.index + 1, row.hash)
        stored, seal = self._stored_head()
        if self._key is not None and not sealed(self._key, stored, seal):
            return AuditHead(last.count + 1, last.hash) if last is not None else resume(None, None)
        return resume(last, stored)

    def _write(self, entries: Sequence[AuditEntry]) -> list[AuditRow]:
        """Append under the lock, waiting for it (the writer thread)."""
        with locked(self._head_fd):
            return self._append_now(entries)

    def _try_write(self, entries: Sequence[AuditEntry]) -> list[AuditRow] | None:
        """Append now if no other writer holds the lock; else None (the calling thread)."""
        if not try_lock(self._head_fd):
            return None
        try:
            if file_size(self._fd) != self._size:
                return None  # another writer appended: the thread catches up (it reads)
            return self._append_locked(self._fd, entries)
        finally:
            unlock(self._head_fd)

    def _append_now(self, entries: Sequence[AuditEntry]) -> list[AuditRow]:
        if file_size(self._fd) != self._size:
            # another sink (process) appended to this file since: chain after its rows
            self._catch_up(self._file)
        return self._append_locked(self._fd, entries)

    def _append_locked(self, fd: int, entries: Sequence[AuditEntry]) -> list[AuditRow]:
        rows, data = _chain_lines(entries, self._head, self._hash_of)
        try:
            _write_all(fd, data)
            if self._fsync:
                _sync(fd)
        except BaseException:
            self._size = -1  # what reached the file is unknown: find out before the next append
            raise
        self._size += len(data)
        head = self._head = new_head(rows[-1])
        self._write_head(head)
        if self._anchor is not None:
            self._anchor(head)
        return rows

    def _write_head(self, head: AuditHead) -> None:
        """Replace ``<path>.head`` by one fixed-size write at offset 0 (no temp file)."""
        if self._key is None:
            record = b'{"count": %d, "hash": "%s"}' % (head.count, head.hash.encode("ascii"))
            os.pwrite(self._head_fd, record.ljust(_HEAD_SIZE - 1) + b"\n", 0)
            return
        record = b'{"count": %d, "hash": "%s", "seal": "%s"}' % (
            head.count, head.hash.encode("ascii"), self._key.head_seal(head).encode("ascii")
        )
        os.pwrite(self._head_fd, record.ljust(_SEALED_HEAD_SIZE - 1) + b"\n", 0)

    def _stored_head(self) -> tuple[AuditHead | None, str | None]:
        """The head in ``<path>.head`` and its seal (None when missing or malformed)."""
        try:
            with open(self._head_path, encoding="utf-8") as f:
                data = json.loads(f.readline())  # (a longer record written before may follow)
            seal = data.get("seal")
            return AuditHead(int(data["count"]), str(data["hash"])), (
                seal if isinstance(seal, str) else None
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None, None

    def _iter_rows(self) -> Iterator[AuditRow | None]:
        """Parse every complete line; a torn tail (no newline) is not a row (see the module)."""
        with open(self._path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    return
                yield _json_row(line)

    def _verify(self, head: AuditHead | None) -> AuditVerification:
        with locked(self._head_fd):  # never read another sink's half-written append
            stored, seal = self._stored_head()
            return verify_log(self._iter_rows(), stored, key=self._key, seal=seal, given=head)

    def _all_rows(self) -> list[AuditRow | None]:
        with locked(self._head_fd):
            return list(self._iter_rows())

    def append(self, entries: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        """Queue ``entries`` as the next rows; the future completes once they are written."""
        return self._writer.append(entries)

    def rows(self) -> list[AuditRow]:
        """Return every row in chain order (a torn tail is not a row: see the module docs).

        Raises:
            ValueError: a complete line does not parse (it was tampered with; `verify` locates
                it).
        """
        rows = self._writer.call(self._all_rows)
        for i, row in enumerate(rows):
            if row is None:
                raise ValueError(f"audit row {i} of {self._path!r} is malformed")
        return [row for row in rows if row is not None]

    def head(self) -> AuditHead:
        """Return the head as written so far (keep a copy elsewhere to anchor the chain)."""
        return self._writer.call(lambda: self._head)

    def verify(self, *, head: AuditHead | None = None) -> AuditVerification:
        """Check the chain: the report is truthy when it holds, else names the first bad row.

        With a key, every row must be the key's and ``<path>.head`` sealed by it (a missing or
        unsealed head reports the row count: the end may have been cut).

        Args:
            head: A head saved earlier (`head`, an anchor); by default the one in
                ``<path>.head`` (with a key, both are checked).
        """
        return self._writer.call(self._verify, head)

    def close(self) -> None:
        """Finish queued appends and close the file (idempotent)."""
        self._writer.close(self._close)

    def _close(self) -> None:
        try:
            if self._fsync and self._head_fd >= 0:
                _sync(self._head_fd)
        finally:
            self._file.close()
            if self._head_fd >= 0:
                os.close(self._head_fd)
                self._head_fd = -1


JsonlAuditSink.__module__ = "middleware.audit"
