"""`SpooledMarkdownArtifact`: a spooled Markdown result, queried by structure.

Parsing uses markdown-it-py (CommonMark plus tables and strikethrough) once, on the first
Markdown query. Rules:

- Line numbers are 0-based line indexes and every ``end``-style line is exclusive, so
  ``cat(start_line, end_line)`` returns exactly the element.
- Front matter is a first line ``---`` closed by a later ``---`` or ``...`` line; it is read with
  ``yaml.safe_load``. Headings, code blocks, links and images inside it are not reported. A front
  matter block that is never closed is not front matter: ``md_frontmatter()`` returns None and the
  document is read as Markdown from line 0 (its ``---`` is a thematic break).
- Headings, links and images inside code are not reported (they are code). An unterminated
  fence runs to the end of the document.

Invalid YAML in a closed front matter block raises `ToolDownstreamError` naming the line, and so
does front matter whose aliases expand to more than ten times its own size (an "alias bomb": a
few hundred bytes of anchors that would serialise to gigabytes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.tree import SyntaxTreeNode
from pydantic import Field

from .._errors import InvalidToolArgsError, ToolDownstreamError
from ._artifact import NoArgs, SpooledArtifact, _Args
from ._toolmethod import ToolMethod

if TYPE_CHECKING:
    from ..stores._spool import SpoolReader

__all__ = ["SpooledMarkdownArtifact"]

_OPEN_FM = re.compile(r"---[ \t]*")
_CLOSE_FM = re.compile(r"(?:---|\.\.\.)[ \t]*")
_NO_FRONT_MATTER = object()


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _plain(children: list[Token] | None) -> str:
    """Return the plain text of inline tokens (markup dropped, image alt text kept)."""
    parts: list[str] = []
    for child in children or ():
        kind = child.type
        if kind in ("text", "code_inline"):
            parts.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "image":
            parts.append(_plain(child.children))
    return "".join(parts)


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


def _check_depth(depth: object) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 6:
        raise InvalidToolArgsError(
            f"depth must be an integer from 1 to 6, got {depth!r}", field="depth"
        )
    return depth


def _node_dict(node: SyntaxTreeNode) -> dict[str, Any]:
    if node.is_root:
        return {"type": "root", "children": [_node_dict(child) for child in node.children]}
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
        record["children"] = [_node_dict(child) for child in node.children]
    elif node.content:
        record["content"] = node.content
    return record


class SpooledMarkdownArtifact(SpooledArtifact):
    """A spooled result holding Markdown, queried by structure.

    Queries: front matter, headings, sections, code blocks, links, images, plain text and the
    syntax tree (record shapes: DESIGN 12).
    """

    __slots__ = ("_front", "_front_end", "_tokens")

    _md: ClassVar[MarkdownIt | None] = None

    def __init__(self, reader: SpoolReader) -> None:
        """Wrap ``reader``."""
        super().__init__(reader)
        self._tokens: list[Token] | None = None
        self._front: Any = _NO_FRONT_MATTER
        self._front_end = 0

    def _parse(self) -> list[Token]:
        tokens = self._tokens
        if tokens is not None:
            return tokens
        text = self.as_string()
        lines = text.split("\n")
        front_end = 0
        if lines and _OPEN_FM.fullmatch(lines[0]):
            for index in range(1, len(lines)):
                if _CLOSE_FM.fullmatch(lines[index]):
                    front_end = index + 1
                    break
        self._front_end = front_end
        if front_end:
            # Blank the front matter so markdown-it's line maps stay absolute.
            text = "\n" * front_end + "\n".join(lines[front_end:])
        parser = SpooledMarkdownArtifact._md
        if parser is None:
            parser = SpooledMarkdownArtifact._md = _parser()
        tokens = self._tokens = parser.parse(text)
        return tokens

    def md_frontmatter(self) -> Any:
        """Return the front matter as parsed YAML (usually a dict; ``{}`` when empty), or None.

        Raises:
            ToolDownstreamError: the front matter is not valid YAML; ``.line`` is its line.
        """
        if self._front is not _NO_FRONT_MATTER:
            return self._front
        self._parse()
        if not self._front_end:
            self._front = None
            return None
        body = "\n".join(self.lines(1, self._front_end - 1))
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
        self._front = {} if value is None else value
        return self._front

    def _headings(self) -> list[dict[str, Any]]:
        tokens = self._parse()
        found: list[dict[str, Any]] = []
        for index, token in enumerate(tokens):
            if token.type == "heading_open" and token.map is not None:
                inline = tokens[index + 1]
                found.append(
                    {
                        "depth": int(token.tag[1]),
                        "text": _plain(inline.children).strip(),
                        "start_line": token.map[0],
                        "end_line": token.map[1],
                    }
                )
        return found

    def md_headings(self, depth: int = 6) -> list[dict[str, Any]]:
        """Return the headings of level ``depth`` or less: ``{depth, text, start_line, end_line}``.

        Raises:
            InvalidToolArgsError: ``depth`` is not from 1 to 6.
        """
        depth = _check_depth(depth)
        return [h for h in self._headings() if h["depth"] <= depth]

    def md_sections(self, depth: int = 6) -> list[dict[str, Any]]:
        """Return a section per heading of level ``depth`` or less.

        Each is ``{depth, heading, heading_line, body_start_line, body_end_line}``; the body runs
        from the line after the heading to the next heading of the same or a higher level (or the
        end of the document), so it includes subsections.

        Raises:
            InvalidToolArgsError: ``depth`` is not from 1 to 6.
        """
        depth = _check_depth(depth)
        headings = self._headings()
        total = self.line_count()
        sections: list[dict[str, Any]] = []
        for index, heading in enumerate(headings):
            level = heading["depth"]
            if level > depth:
                continue
            end = next(
                (h["start_line"] for h in headings[index + 1 :] if h["depth"] <= level), total
            )
            sections.append(
                {
                    "depth": level,
                    "heading": heading["text"],
                    "heading_line": heading["start_line"],
                    "body_start_line": heading["end_line"],
                    "body_end_line": end,
                }
            )
        return sections

    def md_code_blocks(self, lang: str | None = None) -> list[dict[str, Any]]:
        """Return code blocks as ``{lang, start_line, end_line}`` (fences included in the range).

        ``lang`` is the first word of a fence's info string (None for indented blocks and bare
        fences); when given, only blocks of that language (case-insensitive) are returned.
        """
        wanted = lang.lower() if lang else None
        blocks: list[dict[str, Any]] = []
        for token in self._parse():
            if token.type not in ("fence", "code_block") or token.map is None:
                continue
            words = token.info.split()
            block_lang = words[0] if token.type == "fence" and words else None
            if wanted is not None and (block_lang is None or block_lang.lower() != wanted):
                continue
            blocks.append(
                {
                    "lang": block_lang,
                    "start_line": token.map[0],
                    "end_line": token.map[1],
                }
            )
        return blocks

    def md_links(self) -> list[dict[str, Any]]:
        """Return the links as ``{text, url, title}`` (``title`` None when absent)."""
        links: list[dict[str, Any]] = []
        for token in self._parse():
            if token.type != "inline" or not token.children:
                continue
            children = token.children
            for index, child in enumerate(children):
                if child.type != "link_open":
                    continue
                depth, stop = 1, index + 1
                while stop < len(children) and depth:
                    kind = children[stop].type
                    depth += (kind == "link_open") - (kind == "link_close")
                    stop += 1
                title = child.attrs.get("title")
                links.append(
                    {
                        "text": _plain(children[index + 1 : stop - 1]),
                        "url": str(child.attrs.get("href", "")),
                        "title": str(title) if title else None,
                    }
                )
        return links

    def md_images(self) -> list[dict[str, Any]]:
        """Return the images as ``{alt, url, title}`` (``title`` None when absent)."""
        images: list[dict[str, Any]] = []
        for token in self._parse():
            if token.type != "inline":
                continue
            for child in token.children or ():
                if child.type == "image":
                    title = child.attrs.get("title")
                    images.append(
                        {
                            "alt": _plain(child.children),
                            "url": str(child.attrs.get("src", "")),
                            "title": str(title) if title else None,
                        }
                    )
        return images

    def md_text(self) -> str:
        """Return the plain text: paragraphs, headings, list items and code, without markup.

        Blocks are separated by a blank line; raw HTML and front matter are left out.
        """
        blocks: list[str] = []
        for token in self._parse():
            if token.type == "inline":
                text = _plain(token.children)
            elif token.type in ("fence", "code_block"):
                text = token.content.rstrip("\n")
            else:
                continue
            if text:
                blocks.append(text)
        return "\n\n".join(blocks)

    def md_ast(self) -> dict[str, Any]:
        """Return the syntax tree as nested dicts, the root of type ``"root"``.

        Nodes have ``type`` and, when not empty, ``tag``, ``map`` (a line range), ``attrs``,
        ``info``, and ``children`` or ``content``.
        """
        return _node_dict(SyntaxTreeNode(self._parse()))


class DepthArgs(_Args):
    """The deepest heading level to include."""

    depth: int = Field(default=6, ge=1, le=6, description="Deepest heading level (1 to 6).")


class LangArgs(_Args):
    """An optional language filter."""

    lang: str | None = Field(default=None, description="Only blocks of this language (null: all).")


SpooledMarkdownArtifact.tool_methods = (
    ToolMethod(
        "artifact_md_frontmatter",
        "md_frontmatter",
        "Return the YAML front matter of a spooled Markdown result (null when none).",
        NoArgs,
    ),
    ToolMethod(
        "artifact_md_headings",
        "md_headings",
        "List the headings (depth, text, 0-based start_line, exclusive end_line).",
        DepthArgs,
    ),
    ToolMethod(
        "artifact_md_sections",
        "md_sections",
        "List the sections with their 0-based heading and body line ranges (body end "
        "exclusive); read one with artifact_cat.",
        DepthArgs,
    ),
    ToolMethod(
        "artifact_md_code_blocks",
        "md_code_blocks",
        "List the code blocks (lang, 0-based start_line, exclusive end_line).",
        LangArgs,
    ),
    ToolMethod(
        "artifact_md_links",
        "md_links",
        "List the links (text, url, title) of a spooled Markdown result.",
        NoArgs,
    ),
    ToolMethod(
        "artifact_md_images",
        "md_images",
        "List the images (alt, url, title) of a spooled Markdown result.",
        NoArgs,
    ),
    ToolMethod(
        "artifact_md_text",
        "md_text",
        "Return the plain text of a spooled Markdown result, without markup.",
        NoArgs,
    ),
    ToolMethod(
        "artifact_md_ast",
        "md_ast",
        "Return the Markdown syntax tree of a spooled Markdown result as JSON.",
        NoArgs,
    ),
)

SpooledMarkdownArtifact.__module__ = "pipeline"
