"""The Markdown query tools (`MD_TOOL_METHODS`) of `SpooledMarkdownArtifact`.

Imported when ``SpooledMarkdownArtifact.tool_methods`` is first read, not on ``import
pipeline``: the argument models are pydantic models (docs/architecture.md, "Import time").
The renderers are in ``_md_tools.py``.
"""

from __future__ import annotations

from ._args import DepthArgs, LangArgs, LineRangeArgs, NoArgs
from ._md_tools import (
    capped_ast,
    capped_code_blocks,
    capped_headings,
    capped_images,
    capped_links,
    capped_sections,
    capped_text,
)
from ._toolmethod import ToolMethod

__all__ = ["MD_TOOL_METHODS"]


MD_TOOL_METHODS: tuple[ToolMethod, ...] = (
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
        capped=capped_headings,
    ),
    ToolMethod(
        "artifact_md_sections",
        "md_sections",
        "List the sections with their 0-based heading and body line ranges (body end "
        "exclusive); read one with artifact_cat.",
        DepthArgs,
        capped=capped_sections,
    ),
    ToolMethod(
        "artifact_md_code_blocks",
        "md_code_blocks",
        "List the code blocks (lang, 0-based start_line, exclusive end_line).",
        LangArgs,
        capped=capped_code_blocks,
    ),
    ToolMethod(
        "artifact_md_links",
        "md_links",
        "List the links (text, url, title) of a spooled Markdown result, optionally only "
        "those on lines [start_line, end_line) (e.g. a section's body lines).",
        LineRangeArgs,
        capped=capped_links,
    ),
    ToolMethod(
        "artifact_md_images",
        "md_images",
        "List the images (alt, url, title) of a spooled Markdown result, optionally only "
        "those on lines [start_line, end_line).",
        LineRangeArgs,
        capped=capped_images,
    ),
    ToolMethod(
        "artifact_md_text",
        "md_text",
        "Return the plain text of a spooled Markdown result, without markup; optionally only "
        "the blocks starting on lines [start_line, end_line).",
        LineRangeArgs,
        capped=capped_text,
    ),
    ToolMethod(
        "artifact_md_ast",
        "md_ast",
        "Return the Markdown syntax tree of a spooled Markdown result as JSON; optionally only "
        "the top-level nodes starting on lines [start_line, end_line).",
        LineRangeArgs,
        capped=capped_ast,
    ),
)
