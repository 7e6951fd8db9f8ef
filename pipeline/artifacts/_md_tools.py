"""The Markdown query tools' capped renderers (``_cap.py``).

List results stop at the cap; the note names the ``start_line`` to ask for next (records carry
their lines), or, for links and images (whose records have no line), how to narrow the range.
The renderers read an artifact through `MarkdownQueries` (the part of
`SpooledMarkdownArtifact`'s API they use), so they do not name the class that names them (see
``_capped.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from ._cap import cap_items, clip, content_budget, finish, utf8_len

__all__ = [
    "MarkdownQueries",
    "capped_ast",
    "capped_code_blocks",
    "capped_headings",
    "capped_images",
    "capped_links",
    "capped_sections",
    "capped_text",
]


class MarkdownQueries(Protocol):
    """What the Markdown tools' renderers read of an artifact; `SpooledMarkdownArtifact` has it."""

    def md_headings(
        self, depth: int = 6, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """List the headings up to ``depth`` starting on lines ``[start_line, end_line)``."""
        ...

    def md_sections(
        self, depth: int = 6, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """List the sections up to ``depth`` whose heading is on those lines."""
        ...

    def md_code_blocks(
        self, lang: str | None = None, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """List the code blocks (of ``lang``, if given) starting on those lines."""
        ...

    def md_links(self, start_line: int = 0, end_line: int | None = None) -> list[dict[str, Any]]:
        """List the links starting on lines ``[start_line, end_line)``."""
        ...

    def md_images(self, start_line: int = 0, end_line: int | None = None) -> list[dict[str, Any]]:
        """List the images starting on lines ``[start_line, end_line)``."""
        ...

    def md_blocks(self, start_line: int = 0, end_line: int | None = None) -> list[tuple[int, str]]:
        """Return ``(first line, plain text)`` of each block starting on those lines."""
        ...

    def md_ast(self, start_line: int = 0, end_line: int | None = None) -> dict[str, Any]:
        """Return the syntax tree of the top-level nodes starting on those lines."""
        ...


def _from_line(
    tool: str, records: list[dict[str, Any]], key: str, extra: str = ""
) -> Callable[[int], str]:
    def advice(shown: int) -> str:
        if shown >= len(records):
            return f"call {tool} again with a later start_line"
        line = records[shown][key]
        return f"read the rest with {tool}({extra}start_line={line})"

    return advice


def capped_headings(
    artifact: MarkdownQueries,
    cap: int,
    depth: int = 6,
    start_line: int = 0,
    end_line: int | None = None,
) -> str:
    """Render ``md_headings`` within ``cap`` bytes."""
    records = artifact.md_headings(depth, start_line, end_line)
    advice = _from_line("artifact_md_headings", records, "start_line", f"depth={depth}, ")
    return cap_items(records, cap, advice)


def capped_sections(
    artifact: MarkdownQueries,
    cap: int,
    depth: int = 6,
    start_line: int = 0,
    end_line: int | None = None,
) -> str:
    """Render ``md_sections`` within ``cap`` bytes."""
    records = artifact.md_sections(depth, start_line, end_line)
    advice = _from_line("artifact_md_sections", records, "heading_line", f"depth={depth}, ")
    return cap_items(records, cap, advice)


def capped_code_blocks(
    artifact: MarkdownQueries,
    cap: int,
    lang: str | None = None,
    start_line: int = 0,
    end_line: int | None = None,
) -> str:
    """Render ``md_code_blocks`` within ``cap`` bytes."""
    records = artifact.md_code_blocks(lang, start_line, end_line)
    extra = "" if lang is None else f"lang={json.dumps(lang)}, "
    advice = _from_line("artifact_md_code_blocks", records, "start_line", extra)
    return cap_items(records, cap, advice)


def _narrow(tool: str) -> Callable[[int], str]:
    return lambda shown: (
        f"narrow the range with {tool}(start_line=..., end_line=...), e.g. a section's body "
        "lines from artifact_md_sections"
    )


def capped_links(
    artifact: MarkdownQueries, cap: int, start_line: int = 0, end_line: int | None = None
) -> str:
    """Render ``md_links`` within ``cap`` bytes."""
    return cap_items(artifact.md_links(start_line, end_line), cap, _narrow("artifact_md_links"))


def capped_images(
    artifact: MarkdownQueries, cap: int, start_line: int = 0, end_line: int | None = None
) -> str:
    """Render ``md_images`` within ``cap`` bytes."""
    return cap_items(artifact.md_images(start_line, end_line), cap, _narrow("artifact_md_images"))


def capped_text(
    artifact: MarkdownQueries, cap: int, start_line: int = 0, end_line: int | None = None
) -> str:
    """Render ``md_text`` within ``cap`` bytes, whole blocks; the note names the next line."""
    budget = content_budget(cap)
    shown: list[str] = []
    used = 0
    for line, text in artifact.md_blocks(start_line, end_line):
        size = utf8_len(text) + 2
        if used + size > budget:
            body = "\n\n".join(shown) if shown else clip(text, budget)
            what = "the text" if shown else f"the block on line {line} alone is {size:,} bytes; it"
            nxt = line if shown else line + 1
            return finish(
                body,
                f"[output capped at {cap:,} bytes: {what} was cut; read the rest with "
                f"artifact_md_text(start_line={nxt}) (or the block's lines with artifact_cat)]",
                cap,
            )
        shown.append(text)
        used += size
    return "\n\n".join(shown)


def capped_ast(
    artifact: MarkdownQueries, cap: int, start_line: int = 0, end_line: int | None = None
) -> str:
    """Render ``md_ast`` within ``cap`` bytes: whole top-level nodes; the note names the next."""
    tree = artifact.md_ast(start_line, end_line)
    text = json.dumps(tree, indent=2, ensure_ascii=False, default=str)
    if utf8_len(text) <= cap:
        return text
    children: list[dict[str, Any]] = tree["children"]
    budget = content_budget(cap) - 64
    kept: list[dict[str, Any]] = []
    used = 0
    for node in children:
        node_text = json.dumps(node, indent=2, ensure_ascii=False, default=str)
        size = utf8_len(node_text) + 4 * (node_text.count("\n") + 1) + 2  # as nested in root
        if used + size > budget:
            break
        kept.append(node)
        used += size
    body = json.dumps({"type": "root", "children": kept}, indent=2, ensure_ascii=False)
    nxt = children[len(kept)].get("map", [None])[0]
    where = (
        f"read the rest with artifact_md_ast(start_line={nxt})"
        if nxt is not None and kept
        else "narrow the range with start_line/end_line, or read the lines with artifact_cat"
    )
    return finish(
        clip(body, budget),
        f"[output capped at {cap:,} bytes: the first {len(kept):,} of {len(children):,} top-level "
        f"nodes shown; {where}]",
        cap,
    )
