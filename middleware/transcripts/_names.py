"""Safe aliases for recorded tool names loopware cannot register, and readable argument diffs."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Final

__all__ = ["argument_difference", "tool_alias"]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_LIMIT: Final = 64


def tool_alias(name: str, taken: Collection[str]) -> str:
    """A valid tool name for ``name`` (``[A-Za-z0-9_-]{1,64}``) that is not in ``taken``.

    ``Final Answer`` becomes ``Final_Answer`` and ``functions.now:0`` ``functions_now_0``; a
    clash with another name gets a ``_2``, ``_3``... suffix.
    """
    base = _UNSAFE.sub("_", name)[:_LIMIT] or "tool"
    alias, n = base, 2
    while alias in taken:
        suffix = f"_{n}"
        alias = base[: _LIMIT - len(suffix)] + suffix
        n += 1
    return alias


def argument_difference(first: str, second: str) -> tuple[str, str]:
    """What distinguishes two calls' JSON arguments: only the keys whose values differ.

    ``{"path": "a.py", "n": 1}`` and ``{"path": "b.py", "n": 1}`` give ``{"path": "a.py"}`` and
    ``{"path": "b.py"}``; arguments that are not both JSON objects are returned whole.
    """
    try:
        a, b = json.loads(first or "{}"), json.loads(second or "{}")
    except (ValueError, RecursionError):
        return first, second
    if not isinstance(a, dict) or not isinstance(b, dict):
        return first, second
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k, _MISSING) != b.get(k, _MISSING)]
    return _pick(a, keys), _pick(b, keys)


_MISSING: Final = object()


def _pick(args: dict[str, object], keys: list[str]) -> str:
    return json.dumps({k: args[k] for k in keys if k in args}, ensure_ascii=False)
