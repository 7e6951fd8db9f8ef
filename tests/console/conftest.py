"""A running ``loopware console`` (a real subprocess, real HTTP) and headless Chromium for it.

Chromium is Debian's ``/usr/bin/chromium`` driven by playwright (never a downloaded browser),
launched as ``tests/test_docs.py`` launches it.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
pytest.importorskip("uvicorn")

from tests.test_docs import CHROMIUM, CHROMIUM_FLAGS

ROOT = Path(__file__).resolve().parents[2]

needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"Chromium is not installed at {CHROMIUM} (apt-get install chromium; .ci/run does)",
)


DOCS_SHOTS = ROOT / "docs" / "console"


def shoot(page: Any, folder: Path, name: str) -> None:
    """Screenshot the whole page as ``folder/NAME.png``; with ``LOOPWARE_WRITE_SCREENSHOTS``
    set, also as ``docs/console/NAME.png`` (the pictures of docs/guides/console.md)."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("LOOPWARE_WRITE_SCREENSHOTS"):
        DOCS_SHOTS.mkdir(exist_ok=True)
        shutil.copy(path, DOCS_SHOTS / path.name)


class Console:
    """A ``loopware console`` process and the URL (with its token) it printed."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loopware_cli", "console", "--port", "0", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self._first_line()
        self.url = line.split()[-1]
        self.base = self.url.split("/?token=")[0]
        self.token = self.url.split("?token=")[1]
        assert self.proc.stdout is not None
        hook = self.proc.stdout.readline()  # printed at once after the URL
        assert hook.startswith("loopware console: gateway webhook = "), hook
        self.webhook = hook.strip().split(" = ", 1)[1].strip('"')
        """The URL for the gateway's ``[approval] webhook`` (with the hook token)."""

    def _first_line(self, timeout: float = 60) -> str:
        assert self.proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if selector.select(timeout=0.2):
                    line = self.proc.stdout.readline()
                    if line.startswith("loopware console: http://"):
                        return line.strip()
                if self.proc.poll() is not None:
                    break
        finally:
            selector.close()
        self.stop()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        raise AssertionError(f"the console never printed its URL: {err[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=30)


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[object]:
    """A page of a fresh headless Chromium profile (1280x900)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()
