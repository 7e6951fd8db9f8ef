"""SpooledMarkdownArtifact: structure queries with 0-based, end-exclusive line ranges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.artifacts import SpooledMarkdownArtifact
from pipeline.errors import InvalidToolArgsError, ToolDownstreamError
from pipeline.stores import FileSpoolStore, MemorySpoolStore

STORES = ["memory", "file"]
DOC = """---
title: Guide
tags: [a, b]
---
# Intro *here*

See [the docs](https://x.test/docs "Docs") and ![logo](logo.png).

## Install

```bash
# not a heading
pip install x
```

Setext Title
============

    indented code

## Use

Text with [plain](https://y.test).
"""


@pytest.fixture(params=STORES, ids=STORES)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Return ``make(text)`` building a Markdown artifact over each store."""
    store = MemorySpoolStore() if request.param == "memory" else FileSpoolStore(tmp_path)

    def build(text: str) -> SpooledMarkdownArtifact:
        return SpooledMarkdownArtifact(store.write("c1", text))

    return build


def test_front_matter_is_parsed_yaml(make: Any) -> None:
    """Closed front matter is read with safe_load; no front matter gives None; empty gives {}."""
    assert make(DOC).md_frontmatter() == {"title": "Guide", "tags": ["a", "b"]}
    assert make("# No front matter\n").md_frontmatter() is None
    assert make("---\n---\n# T\n").md_frontmatter() == {}
    assert make("---\n- 1\n- 2\n...\n").md_frontmatter() == [1, 2]


def test_headings_outside_front_matter_and_code(make: Any) -> None:
    """Headings come with depth, plain text and their line range; code is not a heading."""
    artifact = make(DOC)
    assert artifact.md_headings() == [
        {"depth": 1, "text": "Intro here", "start_line": 4, "end_line": 5},
        {"depth": 2, "text": "Install", "start_line": 8, "end_line": 9},
        {"depth": 1, "text": "Setext Title", "start_line": 15, "end_line": 17},
        {"depth": 2, "text": "Use", "start_line": 20, "end_line": 21},
    ]
    assert [h["text"] for h in artifact.md_headings(1)] == ["Intro here", "Setext Title"]
    assert artifact.cat(15, 17) == ["Setext Title", "============"]


def test_sections_run_to_the_next_heading_of_the_same_or_higher_level(make: Any) -> None:
    """A section's body ends where a heading of its level or above starts, or at the end."""
    artifact = make(DOC)
    sections = artifact.md_sections()
    assert sections[0] == {"depth": 1, "heading": "Intro here", "heading_line": 4,
                           "body_start_line": 5, "body_end_line": 15}
    assert sections[1] == {"depth": 2, "heading": "Install", "heading_line": 8,
                           "body_start_line": 9, "body_end_line": 15}
    assert sections[3] == {"depth": 2, "heading": "Use", "heading_line": 20,
                           "body_start_line": 21, "body_end_line": artifact.line_count()}
    assert [s["heading"] for s in artifact.md_sections(1)] == ["Intro here", "Setext Title"]


def test_code_blocks_with_language_filter(make: Any) -> None:
    """Fenced and indented blocks are listed with their language and fence-inclusive range."""
    artifact = make(DOC)
    assert artifact.md_code_blocks() == [
        {"lang": "bash", "start_line": 10, "end_line": 14},
        {"lang": None, "start_line": 18, "end_line": 19},
    ]
    assert artifact.md_code_blocks("BASH") == [{"lang": "bash", "start_line": 10, "end_line": 14}]
    assert artifact.md_code_blocks("python") == []


def test_unterminated_fence_runs_to_the_end(make: Any) -> None:
    """An unclosed fence is code to the end of the document, hiding later headings."""
    artifact = make("# Top\n```py\ncode\n# hidden\n")
    assert artifact.md_code_blocks() == [{"lang": "py", "start_line": 1, "end_line": 4}]
    assert [h["text"] for h in artifact.md_headings()] == ["Top"]


def test_unclosed_front_matter_is_plain_markdown(make: Any) -> None:
    """A front matter block that is never closed is not front matter; parsing starts at 0."""
    artifact = make("---\ntitle: x\n# Heading\n")
    assert artifact.md_frontmatter() is None
    assert artifact.md_headings() == [
        {"depth": 1, "text": "Heading", "start_line": 2, "end_line": 3}
    ]


def test_headings_inside_front_matter_are_ignored(make: Any) -> None:
    """Front matter lines never produce headings or links."""
    artifact = make("---\n# comment: yes\nurl: '[x](y)'\n---\n# Real\n")
    assert artifact.md_frontmatter() == {"url": "[x](y)"}
    assert [h["start_line"] for h in artifact.md_headings()] == [4]
    assert artifact.md_links() == []


def test_invalid_yaml_front_matter_names_the_line(make: Any) -> None:
    """Front matter that is not YAML raises ToolDownstreamError with the document line."""
    artifact = make("---\ntitle: ok\nbad: [unclosed\n---\n")
    with pytest.raises(ToolDownstreamError, match="not valid YAML") as info:
        artifact.md_frontmatter()
    assert info.value.line in (2, 3)


def test_front_matter_alias_bomb_is_refused_quickly(make: Any) -> None:
    """A few hundred bytes of nested YAML aliases raise instead of expanding to gigabytes."""
    levels = ['l0: &l0 ["xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxxxxxxx"]']
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    artifact = make("---\n" + "\n".join(levels) + "\n---\n# Title\n")
    with pytest.raises(ToolDownstreamError, match="expands to too much data"):
        artifact.md_frontmatter()
    assert [h["text"] for h in artifact.md_headings()] == ["Title"]


def test_front_matter_may_reuse_an_anchor_a_few_times(make: Any) -> None:
    """Ordinary anchors and aliases in front matter still load."""
    artifact = make("---\nbase: &b {lang: en, draft: false}\none: *b\ntwo: *b\n---\n")
    assert artifact.md_frontmatter()["two"] == {"lang": "en", "draft": False}


def test_links_and_images(make: Any) -> None:
    """Links and images come with plain text, url and title (None when absent)."""
    artifact = make(DOC)
    assert artifact.md_links() == [
        {"text": "the docs", "url": "https://x.test/docs", "title": "Docs"},
        {"text": "plain", "url": "https://y.test", "title": None},
    ]
    assert artifact.md_images() == [{"alt": "logo", "url": "logo.png", "title": None}]


def test_nested_image_inside_link(make: Any) -> None:
    """A linked image gives one link (its text is the alt text) and one image."""
    artifact = make('[![badge](b.svg "B")](https://ci.test)\n')
    assert artifact.md_links() == [{"text": "badge", "url": "https://ci.test", "title": None}]
    assert artifact.md_images() == [{"alt": "badge", "url": "b.svg", "title": "B"}]


def test_plain_text_drops_markup_and_front_matter(make: Any) -> None:
    """md_text keeps the words and code, without markup, HTML or front matter."""
    text = make("---\na: 1\n---\n# Title *x*\n\nSome **bold** `code`.\n\n<div>html</div>\n"
                "\n```\nraw\n```\n").md_text()
    assert text == "Title x\n\nSome bold code.\n\nraw"


def test_ast_is_nested_plain_data(make: Any) -> None:
    """md_ast returns a root dict whose children carry types, tags and line maps."""
    ast = make("# A\n\n- item\n").md_ast()
    assert ast["type"] == "root"
    heading, bullet_list = ast["children"]
    assert heading["type"] == "heading"
    assert heading["tag"] == "h1"
    assert heading["map"] == [0, 1]
    assert bullet_list["type"] == "bullet_list"
    assert bullet_list["children"][0]["type"] == "list_item"


RANGED = """# One

See [a](a.test) and ![i1](1.png).

# Two

Text [b](b.test),
then [c](c.test) ![i2](2.png).

```
[not](a link)
```
"""


def test_links_images_text_and_ast_take_a_line_range(make: Any) -> None:
    """start_line/end_line (0-based, end exclusive) keep what starts on those lines."""
    artifact = make(RANGED)
    two = artifact.md_sections()[1]
    body = (two["body_start_line"], two["body_end_line"])
    assert [link["url"] for link in artifact.md_links(*body)] == ["b.test", "c.test"]
    assert [link["url"] for link in artifact.md_links(0, 4)] == ["a.test"]
    assert [link["url"] for link in artifact.md_links(7, 8)] == ["c.test"]  # its own line
    assert [image["url"] for image in artifact.md_images(*body)] == ["2.png"]
    assert [image["url"] for image in artifact.md_images(end_line=4)] == ["1.png"]
    assert artifact.md_text(*body) == "Text b,\nthen c i2.\n\n[not](a link)"
    assert artifact.md_text(0, 1) == "One"
    ast = artifact.md_ast(4, 5)
    assert [node["type"] for node in ast["children"]] == ["heading"]
    assert ast["children"][0]["map"] == [4, 5]


def test_the_default_range_is_the_whole_document(make: Any) -> None:
    """Without a range (or with 0..None) nothing is left out."""
    artifact = make(RANGED)
    assert artifact.md_links(0, None) == artifact.md_links()
    assert len(artifact.md_links()) == 3
    assert artifact.md_text(0) == artifact.md_text()
    assert artifact.md_ast(0, None) == artifact.md_ast()
    assert artifact.md_images(3, 3) == []  # an empty range


@pytest.mark.parametrize("method", ["md_links", "md_images", "md_text", "md_ast"])
@pytest.mark.parametrize(
    ("start", "end"), [(-1, None), (0, -2), ("1", None), (True, None), (0, 1.5)],
    ids=["negative-start", "negative-end", "str", "bool", "float"],
)
def test_line_ranges_must_be_integers_from_zero(
    make: Any, method: str, start: object, end: object
) -> None:
    """A line bound that is not an integer >= 0 is an argument error naming it."""
    with pytest.raises(InvalidToolArgsError, match="_line must be an integer >= 0"):
        getattr(make(RANGED), method)(start, end)


@pytest.mark.parametrize("depth", [0, 7, -1, "2", True], ids=["zero", "seven", "neg", "str",
                                                              "bool"])
def test_depth_must_be_1_to_6(make: Any, depth: object) -> None:
    """A heading depth outside 1..6 is an argument error."""
    with pytest.raises(InvalidToolArgsError, match="depth"):
        make(DOC).md_headings(depth)
    with pytest.raises(InvalidToolArgsError, match="depth"):
        make(DOC).md_sections(depth)


def test_empty_document(make: Any) -> None:
    """An empty document has no structure and no front matter."""
    artifact = make("")
    assert artifact.md_frontmatter() is None
    assert artifact.md_headings() == []
    assert artifact.md_sections() == []
    assert artifact.md_code_blocks() == []
    assert artifact.md_text() == ""
    assert artifact.md_ast() == {"type": "root", "children": []}
