"""Anchors: where a sink also writes its head after every append, outside the log.

A chain (keyed or not) cannot tell its own end from an earlier end restored with an earlier
copy of the log: whoever can write the log's storage can roll it back. A head kept somewhere that
person cannot write (another host, another account, a write-once store, a ticket, a printout)
can: ``sink.verify(head=saved)`` reports the rows the log no longer reaches. ``anchor=`` makes
the sink hand every new head to a callable (`AuditAnchor`): `AuditAnchorFile` keeps the latest
in a file, and ``print`` or a logger's ``info`` send it to a terminal or a log shipper.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TypeAlias

from pipeline.errors import InvalidMiddlewareConfigError

from ._chain import AuditHead

__all__ = ["AuditAnchor", "AuditAnchorFile", "check_anchor"]

AuditAnchor: TypeAlias = Callable[[AuditHead], object]
"""Called with the chain's new head after each append is written (and synced, with
``synchronous="full"``). It runs on the thread that wrote (the sink's writer thread, or the
caller's with ``synchronous="normal"``), so it must be quick and thread-safe; an exception fails
the append's awaiter (its rows are written), or is ignored after rows written in a store's
transaction (``pipeline.stores.TransactionWriter.settle`` must not raise)."""

_RECORD_SIZE = 256  # {"count": ..., "hash": ...}: up to 20 digits and an 85-character keyed hash


class AuditAnchorFile:
    """An anchor that keeps the latest head in a file of its own (put it out of the log's reach).

    Each head replaces the last (one fixed-size write at offset 0, not synced: after a power loss
    the file may lag the log by a few rows, which ``verify(head=...)`` accepts). Read it back with
    `read`; ``cat`` prints it (one JSON line).

    Args:
        path: The file (created when missing). Keep it where whoever can write the log cannot
            (another mount, host or account), or it protects nothing the log's own head does not.

    Raises:
        InvalidMiddlewareConfigError: ``path`` is not a path.
    """

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Keep the path; the file is written on the first head."""
        given: object = path  # checked at run time
        if not isinstance(given, str | os.PathLike) or not os.fspath(path):
            raise InvalidMiddlewareConfigError(
                f"AuditAnchorFile: path must be a non-empty str or path, got {path!r}",
                option="path",
            )
        self._path = os.fspath(path)

    def __repr__(self) -> str:
        """Show the file."""
        return f"AuditAnchorFile({self._path!r})"

    @property
    def path(self) -> str:
        """The file."""
        return self._path

    def __call__(self, head: AuditHead) -> None:
        """Write ``head`` in place of the one before."""
        record = json.dumps({"count": head.count, "hash": head.hash}).encode("ascii")
        fd = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, record.ljust(_RECORD_SIZE - 1) + b"\n", 0)
        finally:
            os.close(fd)

    def read(self) -> AuditHead | None:
        """The head written last; None when the file is missing, empty or not an anchor."""
        try:
            with open(self._path, encoding="utf-8") as f:
                data = json.load(f)
            count, digest = data["count"], data["hash"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if type(count) is not int or count < 0 or not isinstance(digest, str):
            return None
        return AuditHead(count, digest)


def check_anchor(owner: str, anchor: object) -> AuditAnchor | None:
    """Return ``anchor`` when it is None or callable.

    Raises:
        InvalidMiddlewareConfigError: it is neither.
    """
    if anchor is not None and not callable(anchor):
        raise InvalidMiddlewareConfigError(
            f"{owner}: anchor must be a callable taking the head (e.g. AuditAnchorFile(path)), "
            f"got {anchor!r}",
            option="anchor",
        )
    return anchor


AuditAnchorFile.__module__ = "middleware.audit"
