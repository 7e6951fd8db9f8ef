"""Fast unique ids: a random per-process prefix and a counter (no syscall per id).

A durable turn (``pipeline/durable/``) is re-run from its start after a crash and must mint the
same ids again (message and dispatch ids key stored rows), so `use_id_source` installs a
deterministic source for the current context; without one, ids are random per process.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from contextvars import ContextVar, Token

__all__ = ["IdSource", "new_id", "reset_id_source", "use_id_source"]

IdSource = Callable[[str], str]
"""Mints the id of one kind (``"msg"``, ``"dsp"``, ...) for the current context."""

_PREFIX = os.urandom(6).hex()
_COUNTER = itertools.count(1)
_SOURCE: ContextVar[IdSource | None] = ContextVar("loopware_id_source", default=None)


def new_id(kind: str) -> str:
    """Return ``"<kind>_<12 random hex><counter hex>"``, unique across processes in practice."""
    source = _SOURCE.get()
    if source is not None:
        return source(kind)
    return f"{kind}_{_PREFIX}{next(_COUNTER):x}"


def use_id_source(source: IdSource) -> Token[IdSource | None]:
    """Mint ids with ``source`` in this context (and tasks it starts) until `reset_id_source`."""
    return _SOURCE.set(source)


def reset_id_source(token: Token[IdSource | None]) -> None:
    """Undo the `use_id_source` that returned ``token``."""
    _SOURCE.reset(token)


def _reseed_after_fork() -> None:
    global _PREFIX, _COUNTER
    _PREFIX = os.urandom(6).hex()
    _COUNTER = itertools.count(1)


os.register_at_fork(after_in_child=_reseed_after_fork)
