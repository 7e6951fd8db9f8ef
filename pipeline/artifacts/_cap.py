"""The size cap on what a query tool returns to the model.

A forged query tool never returns more than its artifact class's ``max_result_bytes`` (UTF-8
bytes, the note included), so one call cannot put a 200 MB body into the next prompt. Results
are built within the cap as they stream (lines, matches, records), never whole and then cut, and
a capped result ends with a note saying what was left out and how to read it (the next line
range, offset or start line). The helpers here do the counting; the tools' renderers are in
``_capped.py``, ``_json_tools.py`` and ``_md_tools.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from ._toolmethod import default_serialise

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "MIN_RESULT_BYTES",
    "NOTE_RESERVE",
    "cap_items",
    "cap_text",
    "content_budget",
    "utf8_len",
]

DEFAULT_MAX_RESULT_BYTES = 32 * 1024
"""The default cap on a query tool's result (32 KiB, well under a typical context)."""

MIN_RESULT_BYTES = 1024
"""The smallest cap accepted (room for the note and some content)."""

NOTE_RESERVE = 400
"""Bytes of every cap kept for the note that says how to read the rest."""


def utf8_len(text: str) -> int:
    """Return the UTF-8 size of ``text`` (``isascii`` is O(1), so ASCII text is not encoded)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def content_budget(cap: int) -> int:
    """Return the bytes of a ``cap`` left for content once the note's room is kept."""
    return max(cap, MIN_RESULT_BYTES) - NOTE_RESERVE


def clip(text: str, budget: int) -> str:
    """Return the longest start of ``text`` whose UTF-8 size is at most ``budget``."""
    if utf8_len(text) <= budget:
        return text
    if text.isascii():
        return text[:budget]
    return text.encode("utf-8", "surrogatepass")[:budget].decode("utf-8", "ignore")


def finish(body: str, note: str, cap: int) -> str:
    """Return ``body`` and ``note`` (on its own line), clipped to ``cap`` bytes in all."""
    note = clip(note, NOTE_RESERVE - 1)
    text = f"{body}\n{note}" if body else note
    return clip(text, max(cap, MIN_RESULT_BYTES))


def cap_text(text: str, cap: int, how: str = "") -> str:
    """Return ``text`` whole when it fits ``cap``, else its start and a note (``how``: the rest).

    The fallback for results without a renderer of their own.
    """
    if utf8_len(text) <= cap:
        return text
    budget = content_budget(cap)
    body = clip(text, budget)
    cut = body.rfind("\n")
    if cut > budget // 2:
        body = body[:cut]
    shown = utf8_len(body)
    more = f"; {how}" if how else ""
    return finish(
        body,
        f"[output capped at {cap:,} bytes: the first {shown:,} of {utf8_len(text):,} bytes "
        f"shown{more}]",
        cap,
    )


def _json_item_size(item: Any) -> int:
    text = json.dumps(item, indent=2, ensure_ascii=False, default=str)
    # In a list, each of the item's lines is indented by two spaces and followed by ",\n".
    return utf8_len(text) + 2 * (text.count("\n") + 1) + 2


def cap_items(
    items: Iterable[Any], cap: int, more: Callable[[int], str], *, empty: str = "(empty list)"
) -> str:
    """Serialise a list result streamed from ``items`` within ``cap`` bytes.

    When every item fits, the text is exactly `default_serialise` of the list. Otherwise the
    items that fit are serialised the same way and ``more(count)`` gives the note's advice
    (which offset, start or line to ask for next, ``count`` items on); when the first item alone
    passes the cap it is cut and the advice skips it (``more(1)``). At most the shown items are
    held.
    """
    budget = content_budget(cap) - 4
    shown: list[Any] = []
    used = 0
    for item in items:
        size = _json_item_size(item)
        if used + size > budget:
            if not shown:
                first = json.dumps(item, indent=2, ensure_ascii=False, default=str)
                return finish(
                    clip(first, budget),
                    f"[output capped at {cap:,} bytes: the first item alone is {size:,} bytes "
                    f"and was cut; {more(1)}]",
                    cap,
                )
            return finish(
                default_serialise(shown),
                f"[output capped at {cap:,} bytes: the first {len(shown):,} items shown; "
                f"{more(len(shown))}]",
                cap,
            )
        shown.append(item)
        used += size
    return default_serialise(shown) if shown else empty
