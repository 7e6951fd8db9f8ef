"""Artifact bodies by reference: how a database store keeps a body in a `SpoolStore`.

A database store (`SqliteStore`, `PostgresStore`) never copies an artifact's body into its
tables: it records the spool key under which the body lives in its spool store, and a loaded
artifact reads through that spool (streaming, for `FileSpoolStore`).

- When the artifact's reader already is the spool's reader for the turn's own key
  (``<turn_id>/<call_id>``, what the runner writes when it was given the same spool), only the
  key is recorded: nothing is copied.
- Otherwise the body is copied into the spool under a fresh key the store owns (`owned_key`:
  unique per save, so two processes saving the same call at once never overwrite each other's
  body; whichever row commits last keeps its own), before the row that refers to it commits,
  so a committed reference always has its body. A reader
  over a file (one with a ``path``, like `FileSpoolReader`) is copied in raw chunks (exact
  bytes, never whole in memory); any other reader's text is written as it is (it is in memory
  already for `MemorySpoolReader`).
- Two exceptions, both for bodies already in memory, where `reference_body` returns None and
  the store keeps the body in its row: a body of at most `INLINE_MAX` characters (a file per
  small result would cost more than the row), and text holding a lone surrogate (a file name
  decoded with ``surrogateescape``), which cannot pass through a file spool unchanged (files
  are decoded with ``errors="replace"``).
- Bodies under owned keys are deleted after the row that referred to them is replaced or
  deleted (a crash in between leaves an orphaned body, never a dangling reference).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ._spool import MemorySpoolReader

if TYPE_CHECKING:
    from ..artifacts._artifact import SpooledArtifact
    from ._spool import SpoolReader, SpoolStore

__all__ = [
    "INLINE_MAX",
    "OWNED_PREFIX",
    "is_owned",
    "missing_body",
    "owned_key",
    "reference_body",
]

OWNED_PREFIX = "loopware-store:"
"""Spool keys a store wrote itself (and may delete) start with this."""

INLINE_MAX = 16 * 1024
"""In-memory bodies up to this many characters are kept in the store's row, not copied."""

_CHUNK = 1 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")


def owned_key(conversation_id: str | None, turn_id: str, call_id: str, position: int) -> str:
    """Return a fresh spool key for a copy of a call's ``position``-th artifact body.

    JSON with ASCII escapes keeps the key unambiguous whatever the ids hold; a random token
    makes it unique per save.
    """
    token = secrets.token_hex(8)
    return OWNED_PREFIX + json.dumps([conversation_id, turn_id, call_id, position, token])


def is_owned(key: str) -> bool:
    """Return True when ``key`` names a body a store copied (and so may delete)."""
    return key.startswith(OWNED_PREFIX)


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk


def _copy(spool: SpoolStore, key: str, reader: SpoolReader) -> bool:
    """Copy the body into ``spool`` under ``key``; False when it must stay in the row."""
    path = getattr(reader, "path", None)
    write_chunks = getattr(spool, "write_chunks", None)
    if isinstance(path, Path) and callable(write_chunks) and path.is_file():
        write_chunks(key, _file_chunks(path))
        return True
    text = reader.read_all()
    if len(text) <= INLINE_MAX or (not text.isascii() and _SURROGATE.search(text) is not None):
        return False
    spool.write(key, text)
    return True


def reference_body(
    spool: SpoolStore,
    artifact: SpooledArtifact,
    *,
    turn_key: str,
    own_key: str,
) -> str | None:
    """Return the spool key that holds ``artifact``'s body, copying it there when needed.

    Returns None for a body the store must keep in its row (see the module docstring).

    Args:
        spool: The store's spool.
        artifact: The artifact being stored.
        turn_key: The key the runner writes the call's body under (``<turn_id>/<call_id>``).
        own_key: A fresh key to copy the body to when the spool does not hold it there.
    """
    reader = artifact.reader
    if spool.read(turn_key) is reader:
        return turn_key
    return own_key if _copy(spool, own_key, reader) else None


def missing_body(key: str) -> MemorySpoolReader:
    """Return a reader saying that the body under ``key`` is gone from the spool store.

    A conversation whose spool lost a body (deleted by hand, a spool directory not copied
    with the database) still loads: the artifact reads this one line instead of failing the
    turn that loads it.
    """
    return MemorySpoolReader(f"[loopware: the body of spool key {key!r} is missing]")
