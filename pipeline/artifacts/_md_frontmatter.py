"""Markdown front matter: where it ends, and its YAML read safely.

Front matter is a first line ``---`` closed by a later ``---`` or ``...`` line, read with
``yaml.safe_load``. Invalid YAML raises `ToolDownstreamError` naming the line, and so does front
matter whose aliases expand to more than ten times its own size (an "alias bomb": a few hundred
bytes of anchors that would serialise to gigabytes).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import ToolDownstreamError

__all__ = ["front_matter_end", "load_front_matter"]

_OPEN_FM = re.compile(r"---[ \t]*")
_CLOSE_FM = re.compile(r"(?:---|\.\.\.)[ \t]*")


def front_matter_end(lines: list[str]) -> int:
    """Return the index of the line after a closed front matter block, or 0 when there is none."""
    if lines and _OPEN_FM.fullmatch(lines[0]):
        for index in range(1, len(lines)):
            if _CLOSE_FM.fullmatch(lines[index]):
                return index + 1
    return 0


def load_front_matter(body: str) -> Any:
    """Return the YAML of a front matter ``body`` (between its fences; ``{}`` when empty).

    Raises:
        ToolDownstreamError: the YAML is invalid (``.line`` is its line), or its aliases expand
            to more than ten times its size.
    """
    import yaml  # an optional parser, imported on first use

    try:
        value = yaml.safe_load(body)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        where = f" at line {line}" if line is not None else ""
        detail = getattr(exc, "problem", None) or str(exc).split("\n", 1)[0]
        raise ToolDownstreamError(
            f"the front matter is not valid YAML{where}: {detail}", line=line, format="yaml"
        ) from exc
    _check_expansion(value, 10 * len(body) + 1024)
    return {} if value is None else value


def _check_expansion(value: Any, budget: int) -> None:
    """Raise when ``value`` (YAML, aliases expanded) exceeds ``budget`` characters and nodes.

    Each string (or ``!!binary`` bytes) counts its length, at least one, any other node one;
    shared (aliased) and cyclic parts count every time they are reached, as serialising them
    would.
    """
    stack = [value]
    while stack:
        node = stack.pop()
        budget -= max(len(node), 1) if isinstance(node, str | bytes) else 1
        if budget < 0:
            raise ToolDownstreamError(
                "the front matter expands to too much data (YAML aliases repeat more than ten "
                "times its size)",
                line=None,
                format="yaml",
            )
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple | set):
            stack.extend(node)
