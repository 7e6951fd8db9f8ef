"""Reading markdown-it tokens for the Markdown queries.

Plain text of inline tokens, the line each inline element sits on, the syntax tree as plain
data, and the ``start_line``/``end_line`` ranges the queries take.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidToolArgsError

if TYPE_CHECKING:
    from markdown_it.token import Token
    from markdown_it.tree import SyntaxTreeNode

__all__ = ["in_range", "inline_lines", "line_range", "node_dict", "plain"]


def plain(children: list[Token] | None) -> str:
    """Return the plain text of inline tokens (markup dropped, image alt text kept)."""
    parts: list[str] = []
    for child in children or ():
        kind = child.type
        if kind in ("text", "code_inline"):
            parts.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "image":
            parts.append(plain(child.children))
    return "".join(parts)


def line_range(start_line: object, end_line: object) -> tuple[int, int | None]:
    """Check a ``start_line``/``end_line`` pair (integers >= 0; ``end_line`` may be None)."""
    for name, value in (("start_line", start_line), ("end_line", end_line)):
        if value is None and name == "end_line":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            kind = "an integer >= 0" + (" or null" if name == "end_line" else "")
            raise InvalidToolArgsError(f"{name} must be {kind}, got {value!r}", field=name)
    assert isinstance(start_line, int)  # checked above
    assert end_line is None or isinstance(end_line, int)
    return start_line, end_line


def in_range(line: int | None, start: int, end: int | None) -> bool:
    """Return True when ``line`` is in ``[start, end)`` (``end`` None: no end)."""
    if line is None:  # a token without a line map is only in the whole document
        return start == 0 and end is None
    return start <= line and (end is None or line < end)


def inline_lines(token: Token, kind: str) -> Iterator[tuple[int, int | None]]:
    """Yield ``(index, line)`` for each child of ``kind`` of an inline token.

    The line is the block's first line plus the line breaks before the child (a code span's
    line ending, which CommonMark turns into a space, is not counted).
    """
    first = token.map[0] if token.map is not None else None
    breaks = 0
    for index, child in enumerate(token.children or ()):
        if child.type in ("softbreak", "hardbreak"):
            breaks += 1
        elif child.type == kind:
            yield index, None if first is None else first + breaks


def node_dict(node: SyntaxTreeNode) -> dict[str, Any]:
    """Return ``node`` and its descendants as nested dicts (the root of type ``"root"``)."""
    if node.is_root:
        return {"type": "root", "children": [node_dict(child) for child in node.children]}
    record: dict[str, Any] = {"type": node.type}
    if node.tag:
        record["tag"] = node.tag
    if node.map is not None:
        record["map"] = list(node.map)
    if node.attrs:
        record["attrs"] = {str(k): v for k, v in node.attrs.items()}
    if node.info:
        record["info"] = node.info
    if node.children:
        record["children"] = [node_dict(child) for child in node.children]
    elif node.content:
        record["content"] = node.content
    return record
