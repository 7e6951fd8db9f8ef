"""Worker processes for the durable tests: real ``loopware worker`` subprocesses on a temp dir."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos")

ROOT = Path(__file__).resolve().parents[3]
APP = "tests.pipeline.durable.app"


class Workers:
    """Starts, kills and stops worker processes sharing one folder, system DB, store and log."""

    def __init__(self, folder: Path, system_database: str | None = None) -> None:
        self.folder = folder
        self.log = folder / "handlers.log"
        self.audit = folder / "audit.sqlite"
        self.store = folder / "agent.db"
        self.system_database = system_database or f"sqlite:///{folder / 'system.sqlite'}"
        self.config = folder / "worker.toml"
        self.write_config()
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "LOOPWARE_TEST_LOG": str(self.log),
            "LOOPWARE_TEST_AUDIT": str(self.audit),
        }
        self.running: list[subprocess.Popen[str]] = []

    def write_config(
        self,
        *,
        concurrency: int = 2,
        executor_id: str | None = None,
        middleware: tuple[str, ...] = ("stack",),
        runner: tuple[str, ...] = (),
        store: str = "sqlite:agent.db",
    ) -> Path:
        lines = [
            f'system_database = "{self.system_database}"',
            f"concurrency = {concurrency}",
            "poll_interval = 0.05",
        ]
        if executor_id is not None:
            lines.append(f'executor_id = "{executor_id}"')
        lines += [
            "[runner]",
            f'model_from = "{APP}:model"',
            f'tools = ["{APP}:TOOLS"]',
            "middleware = [" + ", ".join(f'"{APP}:{m}"' for m in middleware) + "]",
            f'store = "{store}"',
            'spool = "spool"',
            *runner,
        ]
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self.config

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "loopware_cli", *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def start(self, *args: str, wait_for: str = "worker ready") -> subprocess.Popen[str]:
        """Start a worker and wait until it prints ``wait_for``."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "loopware_cli", "worker", "--config", str(self.config), *args],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.running.append(proc)
        self.read_until(proc, wait_for)
        return proc

    def read_until(self, proc: subprocess.Popen[str], text: str, timeout: float = 60) -> str:
        """Read the worker's stdout until a line contains ``text``; return that line."""
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if selector.select(timeout=0.2):
                    line = proc.stdout.readline()
                    if text in line:
                        return line
                    if not line and proc.poll() is not None:
                        break
        finally:
            selector.close()
        err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
        raise AssertionError(f"worker never printed {text!r} (exit {proc.poll()}): {err[-2000:]}")

    def kill(self, proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        self.running.remove(proc)

    def died(self, proc: subprocess.Popen[str]) -> int:
        """Wait for a worker that kills itself; return its exit status."""
        proc.communicate(timeout=60)
        self.running.remove(proc)
        return proc.returncode

    def stop(self, proc: subprocess.Popen[str]) -> str:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        self.running.remove(proc)
        assert proc.returncode == 0, err[-2000:]
        return out

    def close(self) -> None:
        for proc in list(self.running):
            proc.kill()
            proc.communicate(timeout=30)
        self.running.clear()

    def handler_runs(self) -> dict[str, int]:
        """How many times each token was recorded by a handler."""
        counts: dict[str, int] = {}
        if self.log.exists():
            for line in self.log.read_text(encoding="utf-8").splitlines():
                counts[line] = counts.get(line, 0) + 1
        return counts


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    """A folder for worker processes; every worker still running at the end is killed."""
    team = Workers(tmp_path)
    try:
        yield team
    finally:
        team.close()
