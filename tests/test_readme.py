"""The Python code blocks of README.md and of every page in docs/ run as written.

Every ```python block is run on its own, in a fresh namespace: a page's example imports what it
uses. Blocks in other languages (```bash, ```toml, ```text) are shown, not run. A page added to
docs/ is picked up without touching this file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    """Each ```python block, with an id naming its file and the line its code starts on."""
    found: list[tuple[str, str]] = []
    for source in SOURCES:
        text = source.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start(1)) + 1
            # padded so a traceback's line numbers are the file's own
            found.append((f"{source.relative_to(ROOT)}:{line}", "\n" * (line - 1) + match.group(1)))
    return found


BLOCKS = _blocks()


def test_readme_has_python_examples() -> None:
    """The README shows runnable code (the quick start at least)."""
    assert any(where.startswith("README.md:") for where, _ in BLOCKS)


def test_the_docs_have_python_examples_on_every_concepts_and_guides_page_that_shows_code() -> None:
    """The runner finds the site's examples: the quick start and the concepts' code are run."""
    files = {where.rsplit(":", 1)[0] for where, _ in BLOCKS}
    assert "docs/getting-started/index.md" in files
    assert sum(f.startswith("docs/concepts/") for f in files) >= 5
    assert sum(f.startswith("docs/guides/") for f in files) >= 4


def test_no_python_block_hides_under_another_fence_name() -> None:
    """A Python example fenced as ```py or ```python3 would be shown but never run."""
    for source in SOURCES:
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"^```(py|python3|pycon)\s*$", text, re.M), source


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_block_runs(where: str, code: str) -> None:
    """Each ```python block runs without error and its asserts hold."""
    path = ROOT / where.rsplit(":", 1)[0]
    exec(compile(code, str(path), "exec"), {"__name__": "docs_example"})
