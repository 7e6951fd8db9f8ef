"""The JSON Lines sink's file work: the lock sinks sharing a log take turns with, and torn tails.

See ``middleware/audit/_jsonl.py``: a killed writer can leave bytes after the last newline; the
next sink cuts them (`tail_start`) and records them in a ``repair`` row (`repair_entry`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pipeline import canonical_json

from ._chain import AuditEntry

__all__ = [
    "KEPT_BYTES",
    "file_size",
    "last_line",
    "locked",
    "repair_entry",
    "tail_start",
    "try_lock",
    "unlock",
    "write_all",
]

KEPT_BYTES = 64 * 1024
"""A repair row keeps the cut bytes themselves (base64) up to this size; hash and length always."""

if sys.platform != "win32":
    import fcntl


if sys.platform == "win32":

    def try_lock(fd: int) -> bool:
        """Take the exclusive lock on ``fd`` if nobody holds it (Windows: no lock, see `locked`)."""
        return True

    def unlock(fd: int) -> None:
        """Release the lock `try_lock` took (Windows: none was taken)."""

else:
    _flock, _TRY, _UNLOCK = fcntl.flock, fcntl.LOCK_EX | fcntl.LOCK_NB, fcntl.LOCK_UN

    def try_lock(fd: int) -> bool:
        """Take the exclusive lock on ``fd`` if nobody holds it; never wait."""
        try:
            _flock(fd, _TRY)
        except BlockingIOError:
            return False
        return True

    def unlock(fd: int) -> None:
        """Release the lock `try_lock` took."""
        _flock(fd, _UNLOCK)


@contextmanager
def locked(fd: int) -> Iterator[None]:
    """Hold an exclusive lock on ``fd`` (the head file) so sinks sharing a log take turns.

    Windows has no ``flock``: there, give each log file one sink.
    """
    if sys.platform == "win32":
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def file_size(fd: int) -> int:
    """The file's size, from ``lseek`` (``fstat`` costs twice as much right after a write).

    Moving the offset of the sink's file is harmless: rows are appended (``O_APPEND``) wherever
    it is, and the sink's buffered handle is only read after a seek to the end (its ``_catch_up``),
    which sets its offset and buffer afresh.
    """
    return os.lseek(fd, 0, os.SEEK_END)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write part of it)."""
    done = os.write(fd, data)
    if done == len(data):
        return
    view = memoryview(data)[done:]
    while view:
        view = view[os.write(fd, view) :]


def tail_start(handle: Any, size: int) -> int:
    """Return the offset just past the last newline of the file (0 when it has none)."""
    pos = size
    while pos > 0:
        step = min(4096, pos)
        pos -= step
        handle.seek(pos)
        cut: int = handle.read(step).rfind(b"\n")
        if cut >= 0:
            return pos + cut + 1
    return 0


def repair_entry(offset: int, torn: bytes) -> AuditEntry:
    """The ``repair`` row recording a torn tail cut at ``offset``."""
    digest = hashlib.sha256(torn).hexdigest()
    details: dict[str, Any] = {"offset": offset, "length": len(torn), "sha256": digest}
    if len(torn) <= KEPT_BYTES:
        details["base64"] = base64.b64encode(torn).decode("ascii")
    return AuditEntry(
        kind="repair",
        turn_id="",
        conversation_id=None,
        recorded_at=datetime.now(UTC),
        checksum=digest,
        args=canonical_json(details),
        is_error=True,
        reason=f"cut a torn tail of {len(torn)} bytes at offset {offset} (an unfinished append)",
    )


def last_line(path: str) -> bytes | None:
    """Return the file's last complete line (without reading the whole file), if any."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        pos, tail = end, b""
        while pos > 0:
            step = min(4096, pos)
            pos -= step
            f.seek(pos)
            tail = f.read(step) + tail
            body = tail.rstrip(b"\n")
            cut = body.rfind(b"\n")
            if cut >= 0:
                return body[cut + 1 :]
        body = tail.rstrip(b"\n")
        return body or None
