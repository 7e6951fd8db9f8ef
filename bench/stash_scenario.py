"""Cost per iteration as users write middleware: five layers keeping their state in ``ctx.stash``.

Run from the repository root::

    python -m bench.stash_scenario            # full run (about a minute)
    python -m bench.stash_scenario --quick    # fewer turns, for a smoke test

What is measured
----------------
* The peer scenario (``bench/peers/``) in one process: a turn of 20 model calls, 19 ``echo``
  calls whose arguments repeat with period 3, then the answer. It runs through `TurnRunner` +
  `ToolLoopExecutor(ScriptedModel)` with the default stores, with 0 and with 5 layers.
* ``echo`` is ``async def``, so the figures are the framework's own cost. A ``def`` handler
  runs in a worker thread (``pipeline/_tool_threads.py``), which costs a thread hop per call,
  the operating system's more than loopware's; the row "a sync echo (thread hop)" is the same
  0-layer turn with ``echo`` written ``def``, minus the async one, in the same repeats, with
  ``asyncio.to_thread`` of a no-op beside it.
* The five layers are ``@dispatch_output`` functions written as docs/concepts/middleware.md shows,
  their state in ``ctx.stash``: a per-tool counter (``stash.update``), a repetition check (a
  per-checksum count, ``stash.increment``), an audit record per call (``stash.append`` of a small
  dict), a deny-list check, and a pass-through. Each turn's result stash is read, as a caller
  would.
* The floor, in the same run: a plain Python loop doing the same work (parse the arguments, call
  the function, keep the result) and, for 5 layers, the layers' work on plain dicts and lists
  (count, a sha256 checksum count, an audit record, a deny check).
* Paired: the configurations run interleaved, repeat after repeat, and each figure is the median
  of its repeats; "added" is the median of the per-repeat differences.
* Scaling: cost per iteration of one turn of 10, 100, 1,000 and 10,000 iterations (5 layers).
* Memory: RSS after 1,000 and after 10,000 turns (5 layers), with a store and a spool that keep
  nothing, so that only the framework could hold memory.

Targets: at most 25 µs per iteration with five layers, at most 8 µs added by them, at
most 14 µs with no middleware, the 10,000-iteration cost within 1.25x of the 10-iteration one,
and RSS flat over 10,000 turns.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from middleware import Middleware
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner
from pipeline.models import ModelRequest, ModelResponse, ProposedToolCall
from pipeline.stages import CallNext
from pipeline.testing import ScriptedModel

from .loop_overhead import ForgetfulSpool, NullStore, echo, echo_text, sync_echo

ITERATIONS = 20
ARGS: tuple[dict[str, str], ...] = ({"text": "a"}, {"text": "b"}, {"text": "c"})
ARGS_JSON = tuple(json.dumps(a, separators=(",", ":")) for a in ARGS)
DENY = frozenset({"shell", "rm"})
REPEAT_THRESHOLD = 3
TARGET_FIVE_US = 25.0
TARGET_ADDED_US = 8.0
TARGET_ZERO_US = 14.0
GROWTH_TOLERANCE = 1.25
SYNC = -1
"""The configuration key of the 0-layer turn whose ``echo`` is a ``def`` (a thread hop per call)."""


layers = Middleware("bench")


@layers.dispatch_output
async def count(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        ctx.stash.update(f"bench.counts.{call.tool}", lambda n: n + 1, default=0)
    await call_next()


@layers.dispatch_output
async def repetition(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        if ctx.stash.increment(f"bench.seen.{call.checksum}") >= REPEAT_THRESHOLD:
            ctx.stash.append("bench.repeats", call.id)
    await call_next()


@layers.dispatch_output
async def audit(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        record = {"id": call.id, "tool": call.tool, "args": call.args, "ok": not call.is_error}
        ctx.stash.append("bench.audit", record)
    await call_next()


@layers.dispatch_output
async def deny(ctx: DispatchContext, call_next: CallNext) -> None:
    for call in ctx.new_tool_calls:
        if call.tool in DENY:
            ctx.stash.append("bench.denied", call.id)
    await call_next()


@layers.dispatch_output
async def pass_through(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


def steps(n: int) -> list[ModelResponse]:
    """A script of ``n - 1`` echo calls (arguments repeat with period 3), then the answer."""
    return [
        ModelResponse(
            tool_calls=[ProposedToolCall(id=f"call_{k}", name="echo", arguments=ARGS_JSON[k % 3])]
        )
        for k in range(n - 1)
    ]


def make_runner(
    n_layers: int, script: Sequence[ModelResponse], *, sync: bool = False, **kw: Any
) -> TurnRunner:
    """A runner whose scripted model serves one turn of ``len(script) + 1`` model calls."""
    return TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(script, record=False)),
        tools=[sync_echo if sync else echo],
        middleware=[layers] if n_layers else [],
        max_iterations=len(script) + 5,
        **kw,
    )


def floor_turn(n_layers: int) -> None:
    """The same turn's work as a plain Python loop (19 calls, and the layers' work for 5)."""
    counts: dict[str, int] = {}
    seen: dict[str, int] = {}
    audit_log: list[dict[str, Any]] = []
    repeats: list[str] = []
    for k in range(ITERATIONS - 1):
        raw = ARGS_JSON[k % 3]
        args = json.loads(raw)
        result = echo_text(**args)
        if n_layers:
            cid = f"call_{k}"
            counts["echo"] = counts.get("echo", 0) + 1
            checksum = hashlib.sha256(raw.encode()).hexdigest()
            seen[checksum] = n = seen.get(checksum, 0) + 1
            if n >= REPEAT_THRESHOLD:
                repeats.append(cid)
            audit_log.append({"id": cid, "tool": "echo", "args": args, "ok": bool(result)})
            if "echo" in DENY:
                repeats.append(cid)


async def time_batch(run: Callable[[], Awaitable[None]], turns: int) -> float:
    """Seconds for ``turns`` turns."""
    gc.collect()
    start = time.perf_counter()
    for _ in range(turns):
        await run()
    return time.perf_counter() - start


async def paired(turns: int, repeats: int) -> dict[str, list[float]]:
    """µs per iteration for each configuration, interleaved repeat after repeat."""
    script = steps(ITERATIONS)
    runners: dict[int, list[TurnRunner]] = {0: [], 5: [], SYNC: []}

    def turn_of(n_layers: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            result = await runners[n_layers].pop().run("go")
            if result.status != "completed":
                result.raise_for_status()
            if n_layers == 5 and len(result.stash["bench"]["audit"]) != ITERATIONS - 1:
                raise AssertionError("the audit layer missed a call")

        return run

    async def floor(n_layers: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            floor_turn(n_layers)

        return run

    async def to_thread() -> None:  # what a thread hop costs without loopware
        for k in range(ITERATIONS - 1):
            await asyncio.to_thread(echo_text, ARGS_JSON[k % 3])

    def runner_of(n: int) -> TurnRunner:
        return make_runner(0, script, sync=True) if n == SYNC else make_runner(n, script)

    out: dict[str, list[float]] = {
        "floor 0": [], "floor 5": [], "0 layers": [], "5 layers": [], "sync": [], "to_thread": []
    }  # fmt: skip
    for n in (0, 5, SYNC):  # warm up
        runners[n] = [runner_of(n) for _ in range(20)]
        await time_batch(turn_of(n), 20)
    for _ in range(repeats):
        for n in (0, 5, SYNC):
            runners[n] = [runner_of(n) for _ in range(turns)]
            seconds = await time_batch(turn_of(n), turns)
            out["sync" if n == SYNC else f"{n} layers"].append(seconds / (turns * ITERATIONS) * 1e6)
            if n == SYNC:
                seconds = await time_batch(to_thread, turns)
                out["to_thread"].append(seconds / (turns * ITERATIONS) * 1e6)
                continue
            floor_turns = turns * 20
            seconds = await time_batch(await floor(n), floor_turns)
            out[f"floor {n}"].append(seconds / (floor_turns * ITERATIONS) * 1e6)
    return out


class StampedModel:
    """A `ScriptedModel` that notes the clock at each model call (to time iterations only)."""

    def __init__(self, script: Sequence[ModelResponse]) -> None:
        self.inner = ScriptedModel(script, record=False)
        self.stamps: list[float] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.stamps.append(time.perf_counter())
        return await self.inner.complete(request)


async def scaling(sizes: Sequence[int], budget_iterations: int) -> dict[int, float]:
    """Median µs per iteration inside one turn of each size (5 layers).

    The clock runs from the turn's second model call to its last, so the turn's fixed start and
    end costs are not spread over its iterations (they would flatter short turns).
    """
    out: dict[int, float] = {}
    for n in sizes:
        script = steps(n)
        turns = max(3, budget_iterations // n)
        samples = []
        for _ in range(turns):
            model = StampedModel(script)
            runner = TurnRunner(
                executor=ToolLoopExecutor(model),
                tools=[echo],
                middleware=[layers],
                max_iterations=n + 5,
            )
            result = await runner.run("go")
            if result.status != "completed":
                result.raise_for_status()
            stamps = model.stamps
            samples.append((stamps[-1] - stamps[1]) / (len(stamps) - 2) * 1e6)
        out[n] = statistics.median(samples)
    return out


def sync_turns(turns: int) -> tuple[float, float]:
    """µs per one-call turn from synchronous code: ``run_sync`` against ``asyncio.run`` per turn."""
    script = [*steps(2), ModelResponse(text="done")]
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel(script, cycle=True, record=False)),
        tools=[echo],
    )
    runner.run_sync("warm up")
    start = time.perf_counter()
    for _ in range(turns):
        runner.run_sync("go")
    shared = (time.perf_counter() - start) / turns * 1e6
    start = time.perf_counter()
    for _ in range(turns):
        asyncio.run(runner.run("go"))
    fresh = (time.perf_counter() - start) / turns * 1e6
    runner.close()
    return shared, fresh


def rss_bytes() -> int:
    """The process's resident set size now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


async def memory(turns: int) -> tuple[int, int]:
    """RSS after a tenth of ``turns`` turns and after all of them (5 layers, 5 iterations)."""
    script = steps(5)
    model = ScriptedModel(script, record=False)
    runner = TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[echo],
        middleware=[layers],
        store=NullStore(),
        spool=ForgetfulSpool(),
    )
    first = 0
    for k in range(turns):
        model.reset()
        await runner.run("go")
        if k + 1 == turns // 10:
            gc.collect()
            first = rss_bytes()
    gc.collect()
    return first, rss_bytes()


async def main(quick: bool, sync: tuple[float, float]) -> int:
    turns, repeats = (10, 3) if quick else (150, 9)
    print(f"Python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print(f"{ITERATIONS} model calls per turn, {turns} turns per repeat, {repeats} repeats")
    results = await paired(turns, repeats)
    med = {k: statistics.median(v) for k, v in results.items()}
    added = statistics.median(
        five - zero for five, zero in zip(results["5 layers"], results["0 layers"], strict=True)
    )
    floor_added = med["floor 5"] - med["floor 0"]
    print("\nµs per iteration (median of repeats)")
    print(f"  floor, plain loop            {med['floor 0']:7.2f}")
    print(f"  floor, plain loop + 5 layers {med['floor 5']:7.2f}  (layers' work {floor_added:.2f})")
    print(f"  loopware, 0 layers           {med['0 layers']:7.2f}")
    print(f"  loopware, 5 stash layers     {med['5 layers']:7.2f}  (added, paired: {added:.2f})")
    hop = statistics.median(
        sync - zero for sync, zero in zip(results["sync"], results["0 layers"], strict=True)
    )
    print(f"  a sync echo (thread hop)     {hop:7.2f}  per call, over the async one (paired)")
    print(f"  asyncio.to_thread of a no-op {med['to_thread']:7.2f}  per call (no loopware)")
    sizes = (10, 100, 1000) if quick else (10, 100, 1000, 10_000)
    scale = await scaling(sizes, 2_000 if quick else 40_000)
    print("\nscaling, 5 layers: µs per iteration by turn length")
    for n, us in scale.items():
        print(f"  {n:>6} iterations  {us:7.2f}  x{us / scale[sizes[0]]:.2f}")
    n_turns = 1_000 if quick else 10_000
    first, last = await memory(n_turns)
    print(
        f"\nRSS after {n_turns // 10} turns {first / 2**20:.1f} MiB, after {n_turns} turns "
        f"{last / 2**20:.1f} MiB (+{(last - first) / 2**10:.0f} KiB)"
    )
    print(
        f"\nsynchronous callers, a one-call turn: run_sync {sync[0]:.0f} µs, "
        f"asyncio.run per turn {sync[1]:.0f} µs"
    )
    growth = scale[sizes[-1]] / scale[sizes[0]]
    verdicts = [
        ("5 layers", med["5 layers"] <= TARGET_FIVE_US, f"<= {TARGET_FIVE_US}"),
        ("added by 5 layers", added <= TARGET_ADDED_US, f"<= {TARGET_ADDED_US}"),
        ("0 layers", med["0 layers"] <= TARGET_ZERO_US, f"<= {TARGET_ZERO_US}"),
        ("growth to the longest turn", growth <= GROWTH_TOLERANCE, f"<= x{GROWTH_TOLERANCE}"),
    ]
    print()
    for name, ok, target in verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  {name} (target {target})")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args()
    sync = sync_turns(200 if args.quick else 2_000)  # before any loop runs in this process
    raise SystemExit(asyncio.run(main(args.quick, sync)))
