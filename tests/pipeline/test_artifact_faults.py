"""Hostile queries of artifacts: the event loop keeps running, grep's
budget is one real deadline, and the JSON5 fallback is bounded."""

from __future__ import annotations

import asyncio
import gc
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import json5
import pytest

import pipeline.artifacts._grep as grep_module
from pipeline.artifacts import SpooledArtifact, SpooledJsonArtifact, ToolMethod
from pipeline.artifacts._args import NoArgs
from pipeline.artifacts._json_formats import JSON5_MAX_BYTES
from pipeline.calls import ToolCall
from pipeline.errors import InvalidToolArgsError, ToolDownstreamError
from pipeline.stores import FileSpoolStore, MemorySpoolStore

# Each line backtracks for under a millisecond with (?:a|a?)+$, far below any budget, but the
# 0.3 MB body (the case) takes seconds in all.
SLOW_LINES = ("a" * 30 + "!\n") * (300_000 // 32)
BUDGET = 0.5
SLACK = 0.6  # scheduling noise allowed past the deadline on a busy test machine
MAX_FREEZE = 0.2  # the longest the event loop may stall while a query runs


class Ctx:
    """The two lookups forged tools use, over a single stored call."""

    turn_id = "turn-1"

    def __init__(self, artifact: SpooledArtifact) -> None:
        self.call = ToolCall.completed(id="a1", tool="fetch", args={}, results=artifact)

    def emit(self, event: object) -> None:
        pass

    def get_tool_call(self, call_id: str) -> ToolCall | None:
        return self.call if call_id == self.call.id else None

    def artifact_call_ids(self, cls: type) -> list[str]:
        return [self.call.id] if isinstance(self.call.results, cls) else []


async def run_watched(query: Awaitable[Any]) -> tuple[Any, float, float]:
    """Await ``query`` beside a 10 ms ticker; return (outcome, wall seconds, longest loop stall).

    The outcome is the result, or the exception raised. The objects the test session made
    before are moved out of the collector's reach while it runs (`gc.freeze`): a full
    collection of a large suite's heap holds the GIL for up to a second, a stall the test
    would otherwise charge to the query.
    """
    gc.collect()
    gc.freeze()
    try:
        return await _watched(query)
    finally:
        gc.unfreeze()


async def _watched(query: Awaitable[Any]) -> tuple[Any, float, float]:
    stall = 0.0
    done = False

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            stall = max(stall, now - last - 0.01)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    outcome: Any
    try:
        outcome = await query
    except Exception as exc:
        outcome = exc
    wall = time.perf_counter() - started
    done = True
    await task
    return outcome, wall, stall


def forged(artifact: SpooledArtifact, name: str) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    ctx = Ctx(artifact)
    tool = type(artifact).forge_tools(ctx).get(name)
    assert tool is not None
    run = tool.bind(ctx)
    return lambda args: run({"call_id": "a1", **args})


@pytest.fixture
def short_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give every grep BUDGET seconds whatever the body's size."""
    monkeypatch.setattr(grep_module, "GREP_TIME_LIMIT", BUDGET)
    monkeypatch.setattr(grep_module, "GREP_SECONDS_PER_MB", 0.0)


@pytest.mark.usefixtures("short_budget")
@pytest.mark.parametrize(
    ("body", "pattern"),
    [(SLOW_LINES, r"(?:a|a?)+$"), ("a" * 40 + "!\nok\n", r"(a|aa)+$")],
    ids=["many-slow-lines", "one-hopeless-line"],
)
async def test_a_catastrophic_grep_keeps_the_loop_running_and_ends_at_its_budget(
    body: str, pattern: str
) -> None:
    """A forged artifact_grep of a small in-memory body runs off the loop and stops in time."""
    grep = forged(SpooledArtifact(MemorySpoolStore().write("a1", body)), "artifact_grep")
    outcome, wall, stall = await run_watched(grep({"pattern": pattern}))
    assert isinstance(outcome, InvalidToolArgsError), outcome
    assert outcome.code == "E_INVALID_TOOL_ARGS"
    # grep's own deadline, or (on a busy machine, where regex's CPU-time timeout lags the wall
    # clock) the forged tool's time limit.
    assert re.search(r"took longer than 0\.5 s|within its 0\.5 s time limit", outcome.message)
    assert wall < BUDGET + SLACK
    assert stall < MAX_FREEZE


@pytest.mark.usefixtures("short_budget")
@pytest.mark.parametrize("kind", ["memory", "file"])
def test_the_budget_is_one_deadline_for_the_whole_search(tmp_path: Path, kind: str) -> None:
    """Lines that are each fast enough still stop the search once their sum reaches the budget."""
    store = MemorySpoolStore() if kind == "memory" else FileSpoolStore(tmp_path)
    artifact = SpooledArtifact(store.write("a1", SLOW_LINES))
    started = time.perf_counter()
    with pytest.raises(InvalidToolArgsError, match="took longer than"):
        artifact.grep(r"(?:a|a?)+$")
    assert time.perf_counter() - started < BUDGET + SLACK


class SlowTailReader:
    """A reader whose line batches are quick to match but slow to finish reading."""

    def __init__(self, lines: list[str], pause: float) -> None:
        self.lines = lines
        self.pause = pause

    def line(self, i: int) -> str:
        return self.lines[i]

    def byte_length(self) -> int:
        return sum(len(line) + 1 for line in self.lines) - 1

    def line_count(self) -> int:
        return len(self.lines)

    def read_all(self) -> str:
        return "\n".join(self.lines)

    def iter_line_batches(self, start: int = 0) -> Iterator[list[str]]:
        yield self.lines[start:]
        time.sleep(self.pause)  # the deadline passes after every line has matched


@pytest.mark.usefixtures("short_budget")
def test_a_search_that_ends_after_its_deadline_returns_an_error_not_results() -> None:
    """No result leaves grep once the deadline has passed, however fast the last match was."""
    artifact = SpooledArtifact(SlowTailReader(["match", "match"], pause=BUDGET + 0.1))
    with pytest.raises(InvalidToolArgsError, match="took longer than"):
        artifact.grep("match")


def test_grep_matches_are_unchanged_by_the_deadline(tmp_path: Path) -> None:
    """The deadline-aware search finds exactly what a plain per-line search finds."""
    lines = [f"{i} {'ERROR' if i % 7 == 0 else 'INFO'} x" for i in range(5_000)]
    body = "\n".join(lines)
    for store in (MemorySpoolStore(), FileSpoolStore(tmp_path)):
        artifact = SpooledArtifact(store.write("a1", body))
        expected = [f"{i}:{line}" for i, line in enumerate(lines) if "ERROR" in line]
        assert artifact.grep("ERROR") == expected
        assert artifact.grep("ERROR", max_matches=3) == expected[:3]


async def test_every_forged_query_runs_in_a_worker_thread_whatever_the_size() -> None:
    """Even a tiny body is queried off the event loop, so a slow query never stalls it."""
    threads: list[threading.Thread] = []

    def slow_head(artifact: SpooledArtifact) -> str:
        threads.append(threading.current_thread())
        time.sleep(0.4)
        return artifact.head(1)[0]

    class Slow(SpooledArtifact):
        tool_methods = (ToolMethod("artifact_slow_head", slow_head, "First line, slowly.", NoArgs),)

    query = forged(Slow(MemorySpoolStore().write("a1", "tiny\nbody")), "artifact_slow_head")
    outcome, _, stall = await run_watched(query({}))
    assert outcome == "tiny"
    assert threads
    assert threads[0] is not threading.main_thread()
    assert stall < MAX_FREEZE


async def test_a_time_limited_query_ends_with_an_error_at_its_limit() -> None:
    """A tool method's time_limit is a wall-clock deadline for the call, even if its thread lags."""

    def stuck(artifact: SpooledArtifact) -> str:
        time.sleep(1.0)
        return "too late"

    class Stuck(SpooledArtifact):
        tool_methods = (
            ToolMethod("artifact_stuck", stuck, "Never in time.", NoArgs, time_limit=lambda _: 0.2),
        )

    query = forged(Stuck(MemorySpoolStore().write("a1", "x")), "artifact_stuck")
    outcome, wall, stall = await run_watched(query({}))
    assert isinstance(outcome, InvalidToolArgsError), outcome
    assert "artifact_stuck did not finish within its 0.2 s time limit" in outcome.message
    assert wall < 0.2 + 0.25 + SLACK
    assert stall < MAX_FREEZE


def test_grep_is_the_time_limited_base_tool() -> None:
    """artifact_grep carries its budget as its time limit; the other base tools have none."""
    artifact = SpooledArtifact(MemorySpoolStore().write("a1", "x" * 2_000_000))
    limits = {m.name: m.time_limit for m in SpooledArtifact.tool_methods}
    grep_limit = limits.pop("artifact_grep")
    assert grep_limit is not None
    assert grep_limit(artifact) == pytest.approx(artifact.grep_time_limit()) == 4.0
    assert set(limits.values()) == {None}


# ---- item 3: the JSON5 fallback -------------------------------------------------------------

RECORD = "{id: 12345, name: 'widget', tags: ['a', 'b',], price: .5,},\n"


def almost_json(size: int) -> str:
    """JSON-like records that only JSON5 accepts (unquoted keys, trailing commas), ``size`` B."""
    return "[\n" + RECORD * ((size - 4) // len(RECORD)) + "]\n"


@pytest.mark.parametrize("fmt", [None, "json5"], ids=["inferred", "explicit"])
def test_json5_is_refused_quickly_above_its_size_bound(fmt: Any) -> None:
    """A 0.6 MB almost-JSON body (the issue's case) fails at once, saying it is too large."""
    body = almost_json(600_000)
    artifact = SpooledJsonArtifact(MemorySpoolStore().write("a1", body), format=fmt)
    started = time.perf_counter()
    with pytest.raises(ToolDownstreamError, match="too large for JSON5") as info:
        artifact.json_keys()
    assert time.perf_counter() - started < 1.0
    assert info.value.code == "E_TOOL_DOWNSTREAM_ERROR"
    assert f"at most {JSON5_MAX_BYTES:,}" in info.value.message
    assert "artifact_grep" in info.value.message


def test_json5_bound_is_a_class_setting() -> None:
    """A subclass can lower (or raise) the bound; bodies within it still parse as JSON5."""

    class Tiny(SpooledJsonArtifact):
        json5_max_bytes = 100

    small = Tiny(MemorySpoolStore().write("a1", "{a: 1,}"))
    assert small.json_keys() == ["a"]
    assert small.format == "json5"
    with pytest.raises(ToolDownstreamError, match="JSON5 was not tried"):
        Tiny(MemorySpoolStore().write("a2", almost_json(200))).json_keys()


def test_a_body_that_failed_to_parse_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow JSON5 failure is paid once; later queries raise the same error at once."""
    calls: list[int] = []
    real = json5.loads

    def counting(text: str) -> Any:
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(json5, "loads", counting)
    artifact = SpooledJsonArtifact(MemorySpoolStore().write("a1", "{a: 1,\n  b: }"))
    messages = []
    for _ in range(3):
        with pytest.raises(ToolDownstreamError) as info:
            artifact.json_keys()
        messages.append(info.value.message)
    assert len(calls) == 1
    assert len(set(messages)) == 1


async def test_a_json5_parse_within_the_bound_keeps_the_loop_running() -> None:
    """The slow JSON5 parse of a body under the bound runs in a worker thread."""
    artifact = SpooledJsonArtifact(MemorySpoolStore().write("a1", almost_json(60_000)))
    keys = forged(artifact, "artifact_json_keys")
    outcome, wall, stall = await run_watched(keys({}))
    assert outcome == "id\nname\ntags\nprice"
    assert wall > 2 * MAX_FREEZE  # slow enough that running on the loop would show
    # The parser is pure Python and shares the GIL with the loop: on a loaded machine one
    # longer stall can happen, but the loop runs for most of the parse.
    assert stall < max(MAX_FREEZE, wall / 3)
