"""The shared scenario, layer bodies and timing harness of the peer benchmark.

Standard library only: every framework script imports this file from its own virtualenv, so the
tool, the five layer bodies, the verification and the clock are byte-for-byte the same for all.
What differs between scripts is only how each framework gets a model answer, runs the tool and
calls the layers (its own middleware/hook mechanism): that difference is what the benchmark
measures.

Scenario: one agent turn of ``ITERATIONS`` iterations; on iteration ``k`` the fake model proposes
one call ``echo(**ARGS[k % 3])``; after the last tool result it answers ``FINAL_TEXT``.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

ITERATIONS = 20
"""Tool-calling iterations per turn (the model answers with text after the last one)."""

ARGS: tuple[dict[str, str], ...] = ({"text": "a"}, {"text": "b"}, {"text": "c"})
"""The arguments of the k-th call are ``ARGS[k % 3]`` (period 3)."""

ARGS_JSON: tuple[str, ...] = tuple(json.dumps(a, separators=(",", ":")) for a in ARGS)
"""The same arguments as JSON text, for models whose wire format carries arguments as text."""

FINAL_TEXT = "done"
"""The fake model's final answer."""

TOOL_NAME = "echo"
DENY = frozenset({"shell", "rm"})
REPEAT_THRESHOLD = 3

TURNS = int(os.environ.get("PEERS_TURNS", "30"))
"""Turns per timed repeat."""

REPEATS = int(os.environ.get("PEERS_REPEATS", "3"))
"""Timed repeats; the report uses their median."""

WARMUP = int(os.environ.get("PEERS_WARMUP", "5"))
"""Untimed turns run before the first timed repeat of each configuration."""


def call_id(k: int) -> str:
    """Return the provider call id the fake models give the k-th call."""
    return f"call_{k}"


def iteration_after(last_call_id: str | None) -> int:
    """Return the next iteration index given the call id of the latest tool result (O(1)).

    Fake models use this instead of rescanning the whole conversation, so the fake model's own
    cost stays constant per iteration in every framework.
    """
    if not last_call_id:
        return 0
    return int(last_call_id.rpartition("_")[2]) + 1


class EchoCounter:
    """Counts how often the echo tool actually ran (verification only)."""

    calls = 0


def echo(text: str) -> str:
    """Return the input text unchanged."""
    EchoCounter.calls += 1
    return text


async def aecho(text: str) -> str:
    """Return the input text unchanged."""
    EchoCounter.calls += 1
    return text


ASYNC_TOOL = os.environ.get("PEERS_ASYNC_TOOL") == "1"
"""Use ``async def echo`` instead of ``def echo`` (frameworks that run sync tools in a thread
pool then skip that hop)."""

ECHO = aecho if ASYNC_TOOL else echo
"""The echo function every framework registers as its tool."""
ECHO.__name__ = "echo"


def checksum(tool: str, args: Mapping[str, Any]) -> str:
    """Return sha256 of the canonical JSON of ``{tool, args}`` (sorted keys, no whitespace)."""
    blob = json.dumps(
        {"tool": tool, "args": args}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class Layers:
    """The bodies of the five layers, and their per-turn state.

    Each framework script calls these from its own middleware/hook mechanism. Layer 5
    (pass-through) has no body: the hook itself is the layer.
    """

    __slots__ = ("audit", "by_checksum", "by_tool", "denied", "flagged")

    def __init__(self) -> None:
        self.by_tool: dict[str, int] = {}
        self.by_checksum: dict[str, int] = {}
        self.flagged = 0
        self.audit: list[dict[str, Any]] = []
        self.denied = 0

    def reset(self) -> None:
        """Start a new turn."""
        self.by_tool = {}
        self.by_checksum = {}
        self.flagged = 0
        self.audit = []
        self.denied = 0

    # 1. count per tool
    def count(self, tool: str) -> None:
        """Layer 1: count calls per tool name."""
        self.by_tool[tool] = self.by_tool.get(tool, 0) + 1

    # 2. repetition check by checksum
    def repetition(self, tool: str, args: Mapping[str, Any]) -> None:
        """Layer 2: checksum the call, count per checksum, flag at the threshold (no action)."""
        key = checksum(tool, args)
        seen = self.by_checksum.get(key, 0) + 1
        self.by_checksum[key] = seen
        if seen >= REPEAT_THRESHOLD:
            self.flagged += 1

    def repetition_seen(self, key: str, seen: int) -> None:
        """Layer 2 for a framework that already checksums and counts calls (loopware)."""
        self.by_checksum[key] = seen
        if seen >= REPEAT_THRESHOLD:
            self.flagged += 1

    # 3. audit record append
    def record(self, tool: str, args: Mapping[str, Any], result: Any) -> None:
        """Layer 3: append an audit record."""
        self.audit.append({"tool": tool, "args": args, "result": result, "time": time.time()})

    # 4. deny-list check
    def deny(self, tool: str) -> None:
        """Layer 4: check the tool name against the deny-list (never matches here)."""
        if tool in DENY:
            self.denied += 1


def result_text(result: Any) -> str | None:
    """Return the text of a tool result as a framework hands it to a layer (verification only).

    A plain string; ADK's ``{"result": text}`` wrapping; loopware's spooled artifact.
    """
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        return result.get("result")
    as_string = getattr(result, "as_string", None)
    return as_string() if callable(as_string) else None


def verify(layers: Layers | None, echo_calls: int) -> None:
    """Check one turn ran every tool call (and every layer saw them), else raise AssertionError.

    The final answer is checked on every turn by the harness.
    """
    if echo_calls != ITERATIONS:
        raise AssertionError(f"echo ran {echo_calls} times, expected {ITERATIONS}")
    if layers is None:
        return
    if layers.by_tool != {TOOL_NAME: ITERATIONS}:
        raise AssertionError(f"count layer saw {layers.by_tool}")
    per_args = [len(range(k, ITERATIONS, len(ARGS))) for k in range(len(ARGS))]
    if sorted(layers.by_checksum.values()) != sorted(per_args):
        raise AssertionError(f"repetition layer counted {sorted(layers.by_checksum.values())}")
    expected_flags = sum(max(0, n - REPEAT_THRESHOLD + 1) for n in per_args)
    if layers.flagged != expected_flags:
        raise AssertionError(f"repetition layer flagged {layers.flagged}, not {expected_flags}")
    if len(layers.audit) != ITERATIONS:
        raise AssertionError(f"audit layer recorded {len(layers.audit)} calls")
    for k, row in enumerate(layers.audit):
        want = ARGS[k % len(ARGS)]
        if dict(row["args"]) != want or result_text(row["result"]) != want["text"]:
            raise AssertionError(f"audit row {k} is {row}")
    if layers.denied:
        raise AssertionError("deny layer matched")


class Config:
    """One framework set up for one layer count: how to run a turn and prepare for a batch.

    Args:
        run_turn: Runs one whole turn and returns the final text.
        prepare: Optional; ``prepare(n)`` builds per-turn objects for the next ``n`` turns. It is
            not timed.
    """

    __slots__ = ("prepare", "run_turn")

    def __init__(
        self,
        run_turn: Callable[[], Awaitable[str | None]],
        prepare: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.run_turn = run_turn
        self.prepare = prepare


LAYER_COUNTS = (0, 5)


async def measure(
    build: Callable[[int], Awaitable[Config]], layers: Layers
) -> dict[int, list[float]]:
    """Verify, warm up and time a framework with 0 and with 5 layers.

    ``build(n)`` sets the framework up with ``n`` layers (0 or 5). Each configuration first runs
    one verified turn, then ``WARMUP`` untimed turns. Timed batches of ``TURNS`` turns then
    alternate between the configurations, ``REPEATS`` times, so drift in machine load hits both
    alike. Returns µs per iteration for each batch, keyed by layer count.
    """
    configs = {n: await build(n) for n in LAYER_COUNTS}
    for n, config in configs.items():
        EchoCounter.calls = 0
        await _batch(config, layers, 1)
        verify(layers if n else None, EchoCounter.calls)
        await _batch(config, layers, WARMUP)
    samples: dict[int, list[float]] = {n: [] for n in configs}
    for _ in range(REPEATS):
        for n, config in configs.items():
            samples[n].append(await _batch(config, layers, TURNS) / (TURNS * ITERATIONS) * 1e6)
    return samples


async def _batch(config: Config, layers: Layers, turns: int) -> float:
    """Run ``turns`` turns (untimed preparation first); return the seconds they took.

    Every turn's answer is checked (one string comparison), so a turn that fails fast cannot
    pass for a fast turn.
    """
    if config.prepare is not None:
        await config.prepare(turns)
    run_turn = config.run_turn
    gc.collect()
    start = time.perf_counter()
    for _ in range(turns):
        layers.reset()
        output = await run_turn()
        if output != FINAL_TEXT:
            raise AssertionError(f"a turn answered {output!r}, expected {FINAL_TEXT!r}")
    return time.perf_counter() - start


def emit(framework: str, version: str, samples: Mapping[int, list[float]], notes: str) -> None:
    """Print the script's single JSON result line."""
    print(
        json.dumps(
            {
                "framework": framework,
                "version": version,
                "python": platform.python_version(),
                "iterations": ITERATIONS,
                "turns": TURNS,
                "repeats": REPEATS,
                "per_iteration_us": {str(k): v for k, v in samples.items()},
                "median_us": {str(k): statistics.median(v) for k, v in samples.items()},
                "notes": notes + ("; async echo tool" if ASYNC_TOOL else ""),
            }
        )
    )


def run_main(main: Callable[[], Awaitable[None]]) -> None:
    """Run a scenario script's async main; any failure exits non-zero with one stderr line."""
    try:
        asyncio.run(main())
    except Exception as exc:
        traceback.print_exc()
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
