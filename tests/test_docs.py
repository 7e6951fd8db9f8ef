"""The documentation site: its navigation, its generated pages, and the built site in a browser.

The reference pages, the event list and the error codes are generated from the code by
docs/_reference_pages.py when the site is built; these tests check that what it generates covers
the code, that mkdocs.yml's `nav:` lists every page, and that the built site renders in headless
Chromium (Debian's /usr/bin/chromium, driven by playwright; .ci/run installs it).
"""

from __future__ import annotations

import dataclasses
import functools
import http.server
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import threading
import types
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _generator() -> types.ModuleType:
    """docs/_reference_pages.py, imported as a module (mkdocs-gen-files runs it as a script)."""
    spec = importlib.util.spec_from_file_location("_reference_pages", DOCS / "_reference_pages.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _nav_pages(entries: list[Any]) -> list[str]:
    """Every page path in a mkdocs `nav:` (entries are paths, or titles mapped to a path or a
    section)."""
    pages: list[str] = []
    for entry in entries:
        if isinstance(entry, str):
            pages.append(entry)
        else:
            for value in dict(entry).values():
                pages.extend([value] if isinstance(value, str) else _nav_pages(value))
    return pages


NAV = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])


def test_the_nav_lists_one_reference_page_per_public_module() -> None:
    """A public module added or removed shows up here until its page is in `nav:`."""
    reference = {page for page in NAV if page.startswith("reference/")}
    modules = {f"reference/{module}.md" for module in GEN.public_modules()}
    hand_written = {"reference/index.md", "reference/events.md", "reference/errors.md"}
    assert reference == modules | hand_written


def test_every_page_in_the_nav_exists_and_every_page_on_disk_is_in_the_nav() -> None:
    """Hand-written pages are on disk; generated ones are the public modules' pages."""
    generated = {f"reference/{module}.md" for module in GEN.public_modules()}
    on_disk = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert set(NAV) - generated == on_disk
    assert len(NAV) == len(set(NAV))


def test_the_error_table_has_one_row_per_exported_loop_error_with_its_code() -> None:
    """Every `LoopError` subclass a public module exports is a row, under its code."""
    from pipeline.errors import LoopError

    classes = set()
    for module_name in GEN.public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, LoopError):
                classes.add(value)
    rows = GEN.errors_table().splitlines()[2:]
    assert len(rows) == len(classes) >= 54
    for cls in classes:
        row = next(row for row in rows if f"[`{cls.__name__}`][{cls.__module__}." in row)
        assert row.startswith(f"| `{cls.code}` |")
        assert f"| {cls.status} |" in row


def test_the_event_table_has_one_row_per_event_with_its_own_fields() -> None:
    """Every event `pipeline.events` exports is a row naming the fields it adds."""
    from pipeline import events

    table = GEN.events_table()
    for name in events.__all__:
        cls = getattr(events, name)
        if inspect.isclass(cls) and issubclass(cls, events.Event) and cls is not events.Event:
            row = next(row for row in table.splitlines() if f"[`{name}`][pipeline.events." in row)
            for field in dataclasses.fields(cls):
                if field.name not in {"turn_id", "timestamp"}:
                    assert f"`{field.name}`" in row


def test_a_module_page_renders_the_module_with_mkdocstrings() -> None:
    """A module's page is its title and the directive that renders its docstrings."""
    assert GEN.module_page("pipeline.calls") == "# `pipeline.calls`\n\n::: pipeline.calls\n"


def test_the_readme_is_a_landing_page_with_the_two_set_up_commands() -> None:
    """At most 150 lines, and the set-up commands .ci/run and CI rely on, exactly."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    assert "pip install . && loopware demo" in readme
    assert "pip install -e '.[dev]' && pytest" in readme


def test_no_dated_figure_outside_the_benchmarks_page() -> None:
    """Dated runs live in bench/results/ (one file per run) and on the benchmarks page only."""
    dated = re.compile(r"\b20\d\d-\d\d-\d\d\b")
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    dated_pages = [p for p in pages if dated.search(p.read_text(encoding="utf-8"))]
    assert [str(p.relative_to(ROOT)) for p in dated_pages] == ["docs/benchmarks.md"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built with `mkdocs build --strict` into a temporary folder, served on
    127.0.0.1; yields its base URL."""
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        # not -q: it hides the warnings --strict turns into a failure
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(folder)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site without logging every request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        """Drops the access log."""


# (path, the page's <h1>, a nav link it must show, what its code block holds)
PAGES = [
    ("", "loopware", "Getting started", "ScriptedModel"),
    ("concepts/tools/", "Tools and registries", "The turn loop", "ToolRegistry"),
    ("reference/pipeline/", "pipeline", "Error codes", "TurnRunner"),
]


@pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"Chromium is not installed at {CHROMIUM} (apt-get install chromium; .ci/run does)",
)
def test_the_built_site_renders_in_headless_chromium(site: str, tmp_path: Path) -> None:
    """The home page, a concepts page and a reference page load in a real browser with their
    titles, the site's navigation and their code; every navigation link answers."""
    from playwright.sync_api import sync_playwright

    user_data = tmp_path / "chromium-profile"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(user_data),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = browser.new_page()
            for path, heading, nav_link, code in PAGES:
                response = page.goto(site + path)
                assert response is not None, path
                assert response.status == 200, path
                assert page.locator("article h1").first.inner_text().strip().rstrip("¶") == heading
                assert heading in page.title()
                assert "loopware" in page.title()
                nav = page.locator("nav.md-nav--primary")
                assert nav.get_by_role("link", name=nav_link, exact=True).count() >= 1, path
                assert code in page.locator("article").inner_text(), path
                assert page.locator("article pre code, article .doc-signature").count() >= 1
                shot = path.strip("/").replace("/", "-") or "home"
                page.screenshot(path=str(tmp_path / f"{shot}.png"))
            hrefs = page.eval_on_selector_all(
                "nav.md-nav--primary a.md-nav__link[href]", "links => links.map(a => a.href)"
            )
        finally:
            browser.close()
    links = {href.split("#", 1)[0] for href in hrefs if href.startswith(site)}
    assert len(links) >= 30
    for link in sorted(links):
        with urllib.request.urlopen(link, timeout=10) as answer:
            assert answer.status == 200, link
    assert len(list(tmp_path.glob("*.png"))) == len(PAGES)
