"""Provider-safe tool names for an MCP server's tools (``^[A-Za-z0-9_-]{1,64}$``).

MCP allows names a provider refuses (dots, slashes, spaces, 128 characters). `safe_name` keeps
a safe name as it is (with the prefix), replaces every other character with ``_`` and cuts a
long name to 55 characters plus ``_`` and 8 hex digits of its SHA-256, so two long names stay
apart. `plan_names` maps a whole listing and skips, with a reason, a tool whose name cannot be
used or collides with an earlier one after renaming.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["plan_names", "safe_name"]

_SAFE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE_CHAR: Final = re.compile(r"[^A-Za-z0-9_-]")


def safe_name(prefix: str, name: str) -> str | None:
    """The provider-safe form of ``prefix + name``, or None when nothing usable is left."""
    full = prefix + name
    if _SAFE.fullmatch(full):
        return full
    cleaned = _UNSAFE_CHAR.sub("_", full)
    if not cleaned.strip("_"):
        return None
    if len(cleaned) > 64:
        digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        cleaned = f"{cleaned[:55]}_{digest}"
    return cleaned


def plan_names(prefix: str, names: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Map server names to loopware names; return ``(kept, skipped)``.

    ``kept`` maps each usable server name to its loopware name; ``skipped`` maps the others to
    the reason (no usable characters, or a collision with an earlier tool after renaming).
    """
    kept: dict[str, str] = {}
    skipped: dict[str, str] = {}
    taken: dict[str, str] = {}
    for name in names:
        if name in kept or name in skipped:
            skipped[name] = "the server listed this name twice"
            kept.pop(name, None)
            continue
        safe = safe_name(prefix, name)
        if safe is None:
            skipped[name] = "the name has no character a provider accepts"
        elif safe in taken:
            skipped[name] = f"renamed to {safe!r}, which tool {taken[safe]!r} already has"
        else:
            kept[name] = safe
            taken[safe] = name
    return kept, skipped
