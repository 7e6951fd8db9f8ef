"""Framework overhead per iteration of the turn loop, with 0 and with 5 middleware layers.

Run from the repository root::

    python -m bench.loop_overhead            # full run (about half a minute)
    python -m bench.loop_overhead --quick    # fewer turns, for a smoke test

What is measured
----------------
* A 50-iteration scripted turn: each iteration the `ScriptedModel` proposes one ``echo`` call
  with fresh arguments (so no policy ever fires: the common case), then it answers. The turn
  runs through `TurnRunner` + `ToolLoopExecutor` with the default `MemoryStore` and
  `MemorySpoolStore`.
* The floor: the same 50 tool calls made directly in a plain loop (parse the JSON arguments,
  call the function, keep the result). The fake model's own (tiny) cost is not in the floor,
  so it counts as framework overhead: the figures are conservative.
* Overhead per iteration = (turn time - floor time) / 50. The configurations are timed in
  interleaved repeats; the verdicts use the best repeat (the least disturbed by other load on
  a shared machine) and the median is printed beside it.
* 5 layers: `ToolCallCounter`, `RepetitionDetector(threshold=3)`, `ToolCallLimit({"echo": N})`,
  `ToolPolicy(deny=["shell*"])` and one custom decorated function (a one-argument sync hook,
  which goes through the wrapt adapter). That is seven middleware runs per iteration: the
  limit and the policy also hook dispatch input.
* The tool: ``echo`` is ``async def``, so the figures are the framework's own cost. A sync
  handler runs in a worker thread (``pipeline/_tool_threads.py``); the row "a sync tool (thread
  hop)" is the same 0-layer turn with ``echo`` written ``def``, minus the async one: what that
  hop costs per call, timed in the same interleaved repeats.
* 5 ``tool_call`` layers: five hooks around each tool execution, written as
  docs/concepts/tool-call-stage.md shows (a deny-list check, a per-tool counter kept in the stash,
  a repeat check reading ``tool_call_count``, a timer, a pass-through). The verdict is the cost
  per layer per call.
* Growth: overhead per iteration of 10- and 1,000-iteration turns (5 layers).
* Retention: 10,000 turns (5 layers, 5 iterations each) with a store and spool that keep
  nothing, so that only the framework could retain memory; traced with `tracemalloc`.

Targets (2-core machine): at most 30 us of overhead per iteration with 5 layers, at most 10 us
added by the 5 layers over 0 layers, at most 2 us per ``tool_call`` layer per call, no growth
with turn length, no memory retained.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

from middleware import (
    Middleware,
    RepetitionDetector,
    ToolCallCounter,
    ToolCallLimit,
    ToolPolicy,
)
from pipeline import DispatchContext, ToolLoopExecutor, TurnRunner, tool
from pipeline.calls import ToolCall, ToolCallContext, ToolCallNext
from pipeline.models import Message, ModelResponse, ProposedToolCall
from pipeline.stores import MemorySpoolStore, SpoolReader, TurnRecord
from pipeline.testing import ScriptedModel

TARGET_OVERHEAD_US = 30.0
TARGET_LAYERS_US = 10.0
TARGET_TOOL_CALL_LAYER_US = 2.0
GROWTH_TOLERANCE = 1.25
RETENTION_BUDGET_BYTES = 64 * 1024


def echo_text(text: str) -> str:
    """What the echo tool does (the floor calls it directly)."""
    return text


@tool(name="echo")
async def echo(text: str) -> str:
    """Return the text unchanged (on the event loop: the framework's own cost is measured)."""
    return echo_text(text)


@tool(name="echo")
def sync_echo(text: str) -> str:
    """Return the text unchanged, as a sync handler (it runs in a worker thread)."""
    return echo_text(text)


def script(iterations: int) -> list[ModelResponse]:
    """One echo call per iteration with fresh arguments, then a final answer."""
    steps = [
        ModelResponse(
            tool_calls=[
                ProposedToolCall(id=f"c{i}", name="echo", arguments=json.dumps({"text": f"t{i}"}))
            ]
        )
        for i in range(iterations)
    ]
    steps.append(ModelResponse(text="done"))
    return steps


def five_layers() -> list[object]:
    """The four built-ins and one custom decorated function."""
    custom = Middleware("custom")

    @custom.dispatch_output
    def warn_on_failures(ctx: DispatchContext) -> None:
        for call in ctx.new_tool_calls:
            if call.is_error:
                ctx.log.warning("tool_failed", f"{call.tool} failed", call_id=call.id)

    return [
        ToolCallCounter(),
        RepetitionDetector(threshold=3),
        ToolCallLimit({"echo": 1_000_000}),
        ToolPolicy(deny=["shell*"]),
        custom,
    ]


def five_tool_call_layers() -> list[object]:
    """Five ``tool_call`` hooks of the kinds users write, state kept in the stash."""
    policy = Middleware("policy")
    denied = frozenset({"shell", "rm"})

    @policy.tool_call
    async def deny_list(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        if ctx.tool_name in denied:
            ctx.deny("not on this agent")
            return
        await call_next()

    @policy.tool_call
    async def count(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        ctx.stash.increment(f"calls.{ctx.tool_name}")
        await call_next()

    @policy.tool_call
    async def no_repeats(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        if ctx.dispatch.tool_call_count(ctx.checksum) >= 3:
            ctx.deny("asked three times already")
            return
        await call_next()

    @policy.tool_call
    async def timer(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        started = time.perf_counter()
        await call_next()
        if time.perf_counter() - started > 5.0:
            ctx.log.warning("slow_tool", f"{ctx.tool_name} took over 5 s")

    @policy.tool_call
    async def passthrough(ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        await call_next()

    return [policy]


class NullStore:
    """A `TurnStore` that keeps nothing (for the retention measurement)."""

    async def save_turn(self, record: TurnRecord) -> None:
        return None

    async def save_message(
        self, conversation_id: str | None, turn_id: str, message: Message
    ) -> None:
        return None

    async def save_tool_call(
        self, conversation_id: str | None, turn_id: str, call: ToolCall
    ) -> None:
        return None

    async def delete_tool_call(
        self, conversation_id: str | None, turn_id: str, call_id: str
    ) -> bool:
        return False

    async def load_conversation(
        self, conversation_id: str
    ) -> tuple[Sequence[Message], Sequence[ToolCall]]:
        return (), ()


class ForgetfulSpool:
    """A spool store whose bodies live only as long as the artifacts reading them."""

    def __init__(self) -> None:
        self._inner = MemorySpoolStore()

    def write(self, id: str, data: str | bytes) -> SpoolReader:
        reader = self._inner.write(id, data)
        self._inner.delete(id)
        return reader

    def read(self, id: str) -> SpoolReader | None:
        return None

    def delete(self, id: str) -> bool:
        return False


def make_runner(
    iterations: int, layers: Sequence[object], tool: Any = echo, **options: Any
) -> TurnRunner:
    model = ScriptedModel(script(iterations), cycle=True, record=False)
    return TurnRunner(
        executor=ToolLoopExecutor(model),
        tools=[tool],
        middleware=layers,
        max_iterations=None,
        **options,
    )


def floor_turn(steps: Sequence[ModelResponse]) -> None:
    """The same tool calls, made directly."""
    results: list[str] = []
    for step in steps:
        for call in step.tool_calls:
            results.append(echo_text(**json.loads(call.arguments)))


async def time_turns(runner: TurnRunner, turns: int) -> float:
    started = time.perf_counter()
    for _ in range(turns):
        result = await runner.run("go")
        if result.status != "completed":
            raise RuntimeError(f"benchmark turn did not complete: {result.errors}")
    return time.perf_counter() - started


def time_floor(steps: Sequence[ModelResponse], turns: int) -> float:
    started = time.perf_counter()
    for _ in range(turns):
        floor_turn(steps)
    return time.perf_counter() - started


class Case:
    """One configuration to time: turns of ``iterations`` iterations through ``layers``."""

    def __init__(
        self,
        iterations: int,
        layers: Callable[[], list[object]],
        turns: int,
        tool: Any = echo,
    ) -> None:
        self.iterations = iterations
        self.layers = layers
        self.tool = tool
        self.turns = turns
        self.steps = script(iterations)
        self.samples: list[float] = []
        self.floor_samples: list[float] = []

    def overhead(self, pick: Callable[[list[float]], float]) -> float:
        """Turn minus floor, in µs per iteration, by ``pick`` (min or median) of the repeats."""
        return pick(self.samples) - pick(self.floor_samples)


async def measure(cases: Sequence[Case], repeats: int) -> None:
    """Time every case ``repeats`` times, interleaved so that load drift hits all alike."""
    for case in cases:  # warm up
        runner = make_runner(case.iterations, case.layers(), case.tool)
        await time_turns(runner, max(2, case.turns // 10))
    for _ in range(repeats):
        for case in cases:
            runner = make_runner(case.iterations, case.layers(), case.tool)  # a fresh MemoryStore
            gc.collect()
            per_iteration = 1e6 / (case.turns * case.iterations)
            case.samples.append(await time_turns(runner, case.turns) * per_iteration)
            case.floor_samples.append(time_floor(case.steps, case.turns) * per_iteration)


async def retained_bytes(turns: int) -> tuple[int, int]:
    """Traced memory growth over ``turns`` turns after a warm-up (bytes, and peak)."""
    runner = make_runner(5, five_layers(), store=NullStore(), spool=ForgetfulSpool())
    await time_turns(runner, 500)
    gc.collect()
    tracemalloc.start(1)
    gc.collect()
    before, _ = tracemalloc.get_traced_memory()
    await time_turns(runner, turns)
    gc.collect()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return after - before, peak - before


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


async def main_async(quick: bool) -> int:
    turns, repeats = (20, 3) if quick else (100, 9)
    print(f"loopware loop overhead  (python {platform.python_version()}, {platform.machine()})")
    print(
        f"scripted turns, {turns} turns x {repeats} interleaved repeats; best of the repeats "
        "(median in brackets)\n"
    )
    bare = Case(50, list, turns)
    five = Case(50, five_layers, turns)
    hooks = Case(50, five_tool_call_layers, turns)
    short = Case(10, five_layers, turns * 5)
    long = Case(1000, five_layers, max(2, turns // 20))
    threaded = Case(50, list, turns, sync_echo)
    await measure([bare, five, hooks, short, long, threaded], repeats)

    floor = min(bare.floor_samples)
    print(f"{'50 iterations':26}{'us/iter':>10}{'overhead':>18}{'x floor':>9}")
    print(f"{'floor (plain loop)':26}{floor:>10.2f}{'':>18}{1.0:>9.1f}")
    for label, case in (("0 layers", bare), ("5 layers", five), ("5 tool_call layers", hooks)):
        best, median = case.overhead(min), case.overhead(statistics.median)
        total = min(case.samples)
        print(f"{label:26}{total:>10.2f}{best:>9.2f} [{median:>6.2f}]{total / floor:>9.1f}")
    added = five.overhead(min) - bare.overhead(min)
    added_median = five.overhead(statistics.median) - bare.overhead(statistics.median)
    print(f"{'added by the 5 layers':26}{'':>10}{added:>9.2f} [{added_median:>6.2f}]")
    per_hook = (hooks.overhead(min) - bare.overhead(min)) / 5
    per_hook_median = (hooks.overhead(statistics.median) - bare.overhead(statistics.median)) / 5
    print(f"{'per tool_call layer/call':26}{'':>10}{per_hook:>9.2f} [{per_hook_median:>6.2f}]")

    hop = threaded.overhead(min) - bare.overhead(min)
    hop_median = threaded.overhead(statistics.median) - bare.overhead(statistics.median)
    print(f"{'a sync tool (thread hop)':26}{'':>10}{hop:>9.2f} [{hop_median:>6.2f}]")

    growth = long.overhead(min) / short.overhead(min)
    print(
        f"\ngrowth (5 layers): overhead/iter at 10 iterations {short.overhead(min):.2f} us, "
        f"at 1,000 {long.overhead(min):.2f} us (x{growth:.2f})"
    )

    retention_turns = 2_000 if quick else 10_000
    retained, peak = await retained_bytes(retention_turns)
    print(
        f"retention: {retention_turns:,} turns kept {retained:+,} bytes "
        f"({retained / retention_turns:+.1f} B/turn; transient peak {peak:,} bytes)"
    )

    checks = [
        (
            f"5-layer overhead <= {TARGET_OVERHEAD_US:.0f} us/iter",
            five.overhead(min) <= TARGET_OVERHEAD_US,
        ),
        (f"5 layers add <= {TARGET_LAYERS_US:.0f} us/iter", added <= TARGET_LAYERS_US),
        (
            f"a tool_call layer adds <= {TARGET_TOOL_CALL_LAYER_US:.0f} us/call",
            per_hook <= TARGET_TOOL_CALL_LAYER_US,
        ),
        (f"no growth with turn length (<= x{GROWTH_TOLERANCE})", growth <= GROWTH_TOLERANCE),
        (
            f"no retention (< {RETENTION_BUDGET_BYTES // 1024} KiB)",
            retained < RETENTION_BUDGET_BYTES,
        ),
    ]
    print()
    for label, ok in checks:
        print(f"{verdict(ok)}  {label}")
    if quick:  # a smoke run: too few turns for a verdict to mean anything
        return 0
    return 0 if all(ok for _, ok in checks) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer turns (smoke test)")
    args = parser.parse_args(argv)
    return asyncio.run(main_async(args.quick))


if __name__ == "__main__":
    sys.exit(main())
