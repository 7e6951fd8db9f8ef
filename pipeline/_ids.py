"""Fast unique ids: a random per-process prefix and a counter (no syscall per id)."""

from __future__ import annotations

import itertools
import os

__all__ = ["new_id"]

_PREFIX = os.urandom(6).hex()
_COUNTER = itertools.count(1)


def new_id(kind: str) -> str:
    """Return ``"<kind>_<12 random hex><counter hex>"``, unique across processes in practice."""
    return f"{kind}_{_PREFIX}{next(_COUNTER):x}"


def _reseed_after_fork() -> None:
    global _PREFIX, _COUNTER
    _PREFIX = os.urandom(6).hex()
    _COUNTER = itertools.count(1)


os.register_at_fork(after_in_child=_reseed_after_fork)
