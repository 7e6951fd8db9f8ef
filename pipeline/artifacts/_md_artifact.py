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
- ``md_links``, ``md_images``, ``md_text`` and ``md_ast`` take ``start_line``/``end_line``
  (0-based, end exclusive; None: to the end): they report only what starts on a line in that
  range, so a section's ``body_start_line``/``body_end_line`` select its links or its text. A
  link or image starts on its own line within its paragraph, a text block or tree node on its
  first line.

Invalid YAML in a closed front matter block raises `ToolDownstreamError` naming the line, and so
does front matter whose aliases expand to more than ten times its own size (an "alias bomb": a
few hundred bytes of anchors that would serialise to gigabytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import InvalidToolArgsError, ToolDownstreamError
from ._artifact import SpooledArtifact
from ._md_frontmatter import front_matter_end, load_front_matter
from ._md_tokens import in_range, inline_lines, line_range, node_dict, plain
from ._toolmethod import DeferredToolMethods, ToolMethod

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

    from ..stores._spool import SpoolReader

__all__ = ["MD_MAX_BYTES", "SpooledMarkdownArtifact"]

_NO_FRONT_MATTER = object()

MD_MAX_BYTES = 8 << 20
"""The largest body (8 MiB) parsed as Markdown by default: markdown-it's tokens take many times
the text's size, and a parse cannot be interrupted."""


def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt  # an optional parser, imported on first use

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _check_depth(depth: object) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 6:
        raise InvalidToolArgsError(
            f"depth must be an integer from 1 to 6, got {depth!r}", field="depth"
        )
    return depth


class SpooledMarkdownArtifact(SpooledArtifact):
    """A spooled result holding Markdown, queried by structure.

    Queries: front matter, headings, sections, code blocks, links, images, plain text and the
    syntax tree (record shapes: docs/concepts/artifacts.md).
    """

    __slots__ = ("_front", "_front_end", "_tokens")

    _md: ClassVar[MarkdownIt | None] = None

    md_max_bytes: ClassVar[int] = MD_MAX_BYTES
    """The largest body parsed as Markdown (see `MD_MAX_BYTES`); a larger one makes the
    Markdown queries say so and point at ``artifact_grep`` and ``artifact_cat``."""

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
        size = self.byte_length()
        if size > self.md_max_bytes:
            raise ToolDownstreamError(
                f"the artifact is too large to parse as Markdown ({size:,} bytes; at most "
                f"{self.md_max_bytes:,} are parsed): read it as text with artifact_grep (e.g. "
                "'^#+ ' for headings) or artifact_cat",
                line=None,
                format="markdown",
            )
        text = self.as_string()
        lines = text.split("\n")
        front_end = self._front_end = front_matter_end(lines)
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
        self._front = load_front_matter(body)
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
                        "text": plain(inline.children).strip(),
                        "start_line": token.map[0],
                        "end_line": token.map[1],
                    }
                )
        return found

    def md_headings(
        self, depth: int = 6, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """Return the headings of level ``depth`` or less: ``{depth, text, start_line, end_line}``.

        Only headings starting on a line in ``[start_line, end_line)`` are returned.

        Raises:
            InvalidToolArgsError: ``depth`` is not from 1 to 6, or a line bound is invalid.
        """
        depth = _check_depth(depth)
        start, end = line_range(start_line, end_line)
        return [
            h
            for h in self._headings()
            if h["depth"] <= depth and in_range(h["start_line"], start, end)
        ]

    def md_sections(
        self, depth: int = 6, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """Return a section per heading of level ``depth`` or less.

        Each is ``{depth, heading, heading_line, body_start_line, body_end_line}``; the body runs
        from the line after the heading to the next heading of the same or a higher level (or the
        end of the document), so it includes subsections. Only sections whose heading is on a
        line in ``[start_line, end_line)`` are returned.

        Raises:
            InvalidToolArgsError: ``depth`` is not from 1 to 6, or a line bound is invalid.
        """
        depth = _check_depth(depth)
        first, last = line_range(start_line, end_line)
        headings = self._headings()
        total = self.line_count()
        sections: list[dict[str, Any]] = []
        for index, heading in enumerate(headings):
            level = heading["depth"]
            if level > depth or not in_range(heading["start_line"], first, last):
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

    def md_code_blocks(
        self, lang: str | None = None, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """Return code blocks as ``{lang, start_line, end_line}`` (fences included in the range).

        ``lang`` is the first word of a fence's info string (None for indented blocks and bare
        fences); when given, only blocks of that language (case-insensitive) are returned. Only
        blocks starting on a line in ``[start_line, end_line)`` are returned.

        Raises:
            InvalidToolArgsError: a line bound is invalid.
        """
        wanted = lang.lower() if lang else None
        start, end = line_range(start_line, end_line)
        blocks: list[dict[str, Any]] = []
        for token in self._parse():
            if token.type not in ("fence", "code_block") or token.map is None:
                continue
            if not in_range(token.map[0], start, end):
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

    def md_links(self, start_line: int = 0, end_line: int | None = None) -> list[dict[str, Any]]:
        """Return the links as ``{text, url, title}`` (``title`` None when absent).

        Only links starting on a line in ``[start_line, end_line)`` are returned.

        Raises:
            InvalidToolArgsError: ``start_line`` or ``end_line`` is not an integer >= 0.
        """
        start, end = line_range(start_line, end_line)
        links: list[dict[str, Any]] = []
        for token in self._parse():
            if token.type != "inline" or not token.children:
                continue
            children = token.children
            for index, line in inline_lines(token, "link_open"):
                if not in_range(line, start, end):
                    continue
                child = children[index]
                depth, stop = 1, index + 1
                while stop < len(children) and depth:
                    kind = children[stop].type
                    depth += (kind == "link_open") - (kind == "link_close")
                    stop += 1
                title = child.attrs.get("title")
                links.append(
                    {
                        "text": plain(children[index + 1 : stop - 1]),
                        "url": str(child.attrs.get("href", "")),
                        "title": str(title) if title else None,
                    }
                )
        return links

    def md_images(
        self, start_line: int = 0, end_line: int | None = None
    ) -> list[dict[str, Any]]:
        """Return the images as ``{alt, url, title}`` (``title`` None when absent).

        Only images on a line in ``[start_line, end_line)`` are returned.

        Raises:
            InvalidToolArgsError: ``start_line`` or ``end_line`` is not an integer >= 0.
        """
        start, end = line_range(start_line, end_line)
        images: list[dict[str, Any]] = []
        for token in self._parse():
            if token.type != "inline" or not token.children:
                continue
            for index, line in inline_lines(token, "image"):
                if not in_range(line, start, end):
                    continue
                child = token.children[index]
                title = child.attrs.get("title")
                images.append(
                    {
                        "alt": plain(child.children),
                        "url": str(child.attrs.get("src", "")),
                        "title": str(title) if title else None,
                    }
                )
        return images

    def md_text(self, start_line: int = 0, end_line: int | None = None) -> str:
        """Return the plain text: paragraphs, headings, list items and code, without markup.

        Blocks are separated by a blank line; raw HTML and front matter are left out. Only
        blocks whose first line is in ``[start_line, end_line)`` are included.

        Raises:
            InvalidToolArgsError: ``start_line`` or ``end_line`` is not an integer >= 0.
        """
        return "\n\n".join(text for _, text in self.md_blocks(start_line, end_line))

    def md_blocks(self, start_line: int = 0, end_line: int | None = None) -> list[tuple[int, str]]:
        """Return the blocks of `md_text` as ``(first line, text)`` pairs.

        Raises:
            InvalidToolArgsError: ``start_line`` or ``end_line`` is not an integer >= 0.
        """
        start, end = line_range(start_line, end_line)
        blocks: list[tuple[int, str]] = []
        for token in self._parse():
            first = token.map[0] if token.map else None
            if not in_range(first, start, end):
                continue
            if token.type == "inline":
                text = plain(token.children)
            elif token.type in ("fence", "code_block"):
                text = token.content.rstrip("\n")
            else:
                continue
            if text:
                blocks.append((first or 0, text))
        return blocks

    def md_ast(self, start_line: int = 0, end_line: int | None = None) -> dict[str, Any]:
        """Return the syntax tree as nested dicts, the root of type ``"root"``.

        Nodes have ``type`` and, when not empty, ``tag``, ``map`` (a line range), ``attrs``,
        ``info``, and ``children`` or ``content``. The root keeps only the top-level nodes whose
        first line is in ``[start_line, end_line)`` (whole, with all their children).

        Raises:
            InvalidToolArgsError: ``start_line`` or ``end_line`` is not an integer >= 0.
        """
        from markdown_it.tree import SyntaxTreeNode

        start, end = line_range(start_line, end_line)
        tree = node_dict(SyntaxTreeNode(self._parse()))
        if start or end is not None:
            tree["children"] = [
                node
                for node in tree["children"]
                if in_range(node["map"][0] if "map" in node else None, start, end)
            ]
        return tree


def _md_tool_methods() -> tuple[ToolMethod, ...]:
    from ._md_methods import MD_TOOL_METHODS

    return MD_TOOL_METHODS


# Built when first read, as SpooledArtifact's own (docs/architecture.md, "Import time"): a
# descriptor that reads as the tuple, so mypy's view of the ClassVar holds.
SpooledMarkdownArtifact.tool_methods = DeferredToolMethods(_md_tool_methods)  # type: ignore[assignment]

SpooledMarkdownArtifact.__module__ = "pipeline.artifacts"
