"""Shared tools and helpers for the turn-loop tests (runner, turn, onion, events, executor)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from pipeline import Tool, TurnRunner, tool
from pipeline.events import Event
from pipeline.stores import MemoryStore, TurnStore

from .._stores import PostgresBackend, SqliteBackend, StoreBackend


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> StoreBackend:
    """Each durable store backend: an SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return SqliteBackend(tmp_path)
    return PostgresBackend(request.getfixturevalue("pg_conninfo"), tmp_path)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TurnStore]:
    """Each built-in `TurnStore`, open on an empty database (closed afterwards)."""
    if request.param == "memory":
        yield MemoryStore()
        return
    backend: StoreBackend = (
        SqliteBackend(tmp_path)
        if request.param == "sqlite"
        else PostgresBackend(request.getfixturevalue("pg_conninfo"), tmp_path)
    )
    opened = await backend.open()
    yield opened
    await opened.aclose()


@pytest.fixture
def echo_tool() -> Tool[BaseModel]:
    """A tool that returns its ``text`` argument."""

    @tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return echo


@pytest.fixture
def add_tool() -> Tool[BaseModel]:
    """A tool that adds two integers (strictly validated)."""

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    return add


@pytest.fixture
def boom_tool() -> Tool[BaseModel]:
    """A tool whose handler always raises ``RuntimeError("kaboom")``."""

    @tool
    def boom() -> str:
        """Always fail."""
        raise RuntimeError("kaboom")

    return boom


@pytest.fixture
def nap_started() -> asyncio.Event:
    """Set as soon as any ``nap`` call starts sleeping."""
    return asyncio.Event()


@pytest.fixture
def nap_cancelled() -> list[str]:
    """Labels of ``nap`` calls that were cancelled while sleeping."""
    return []


@pytest.fixture
def nap_tool(nap_started: asyncio.Event, nap_cancelled: list[str]) -> Tool[BaseModel]:
    """An async tool that sleeps ``seconds`` and returns ``label`` (records start and cancel)."""

    @tool
    async def nap(seconds: float, label: str) -> str:
        """Sleep a while, then return the label."""
        nap_started.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            nap_cancelled.append(label)
            raise
        return label

    return nap


@pytest.fixture
def record() -> Callable[[TurnRunner], list[Event]]:
    """Return ``attach(runner) -> list`` that collects every event the runner emits."""

    def attach(runner: TurnRunner) -> list[Event]:
        seen: list[Event] = []
        runner.on_any(seen.append)
        return seen

    return attach
