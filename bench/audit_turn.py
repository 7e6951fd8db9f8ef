"""What `AuditLog` costs per tool call in a turn, with a durable store and without one.

Run: ``python -m bench.audit_turn [--rounds 15] [--turns 4] [--calls 25]`` (``--quick``: a
smoke run). Each turn is scripted: the model proposes one ``search`` call per iteration for
``--calls`` iterations, then answers; the tool returns at once, so what is measured is the
loop's own work and its writes. Every turn has a conversation, so the store keeps its messages
and calls. For ``synchronous="normal"`` (every write survives a process kill) and ``"full"``
(every write survives power loss), the store and the sink alike, the configurations are:

- ``store``: `SqliteStore` alone (no audit), the baseline of the next two;
- ``+audit, 2 files``: `SqliteStore` and ``AuditLog(SqliteAuditSink(<another file>))``;
- ``+audit, 1 file``: `SqliteStore` and ``AuditLog(SqliteAuditSink(<the store's file>))``;
- ``memory``: `MemoryStore` alone, the baseline of the next one;
- ``memory+audit``: `MemoryStore` and ``AuditLog(SqliteAuditSink(...))`` (nothing the store
  keeps survives the process: the gateway's case).

Each configuration runs on fresh files in one process; the rounds interleave them (rotating
which goes first), ``--turns`` turns per configuration per round. The table shows, per
configuration, the median over the rounds of µs per call (the turn's wall time divided by its
calls), and the µs per call the audit adds over its baseline (the median of the paired
differences), with the CPU time per call (all threads) beside them. It uses only names that
existed before the audit wrote a call's row with the store's write, so it runs against the
tree before it too (``PYTHONPATH=<that tree> python -m bench.audit_turn`` from there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Literal

from middleware.audit import AuditLog, SqliteAuditSink
from pipeline import ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import MemoryStore, SqliteStore, TurnStore
from pipeline.testing import ScriptedModel

Sync = Literal["full", "normal"]
CONFIGS = ("store", "+audit, 2 files", "+audit, 1 file", "memory", "memory+audit")
BASELINE = {"+audit, 2 files": "store", "+audit, 1 file": "store", "memory+audit": "memory"}


@tool
def search(q: str) -> str:
    """Return at once."""
    return "found " + q


class Config:
    """One configuration's runner, on its own files."""

    def __init__(self, name: str, sync: Sync, folder: Path, calls: int) -> None:
        self.name = name
        self.calls = calls
        self.closers: list[object] = []
        store: TurnStore
        middleware: list[object] = []
        path = folder / "loopware.sqlite"
        if name.startswith("memory"):
            store = MemoryStore()
        else:
            sqlite = SqliteStore(path, synchronous=sync)
            self.closers.append(sqlite)
            store = sqlite
        if "audit" in name:
            audit = path if name == "+audit, 1 file" else folder / "audit.sqlite"
            sink = SqliteAuditSink(audit, synchronous=sync)
            self.closers.append(sink)
            middleware.append(AuditLog(sink))
        self.store = store
        self.middleware = middleware
        self.turns = 0

    def runner(self) -> TurnRunner:
        """A runner for one turn (the scripted model is used up by it)."""
        steps = [
            ModelResponse(tool_calls=[ProposedToolCall(
                id=f"c{i}", name="search", arguments=json.dumps({"q": str(i)})
            )])
            for i in range(self.calls)
        ]
        return TurnRunner(
            executor=ToolLoopExecutor(ScriptedModel([*steps, ModelResponse(text="done")])),
            tools=[search],
            middleware=self.middleware,
            store=self.store,
            max_iterations=None,
        )

    async def run(self, turns: int) -> tuple[float, float]:
        """Run ``turns`` turns; return wall and CPU µs per call."""
        runners = [self.runner() for _ in range(turns)]
        cpu, t0 = time.process_time(), time.perf_counter()
        for runner in runners:
            self.turns += 1
            result = await runner.run("go", conversation_id=f"{self.name}-{self.turns}")
            assert result.status == "completed", result.errors
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
        calls = turns * self.calls
        return wall / calls * 1e6, cpu / calls * 1e6

    def close(self) -> None:
        for closer in self.closers:
            close = getattr(closer, "close", None)
            if callable(close):
                close()


async def measure(sync: Sync, rounds: int, turns: int, calls: int) -> dict[str, list[float]]:
    """Per configuration, ``[wall µs, cpu µs]`` per call for every round."""
    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as root:
        configs = []
        for i, name in enumerate(CONFIGS):
            folder = Path(root) / str(i)
            folder.mkdir()
            configs.append(Config(name, sync, folder, calls))
        try:
            for config in configs:  # warm up: files, schemas, imports
                await config.run(1)
            walls: dict[str, list[float]] = {c.name: [] for c in configs}
            cpus: dict[str, list[float]] = {c.name: [] for c in configs}
            for r in range(rounds):
                order = configs[r % len(configs):] + configs[: r % len(configs)]
                for config in order:
                    wall, cpu = await config.run(turns)
                    walls[config.name].append(wall)
                    cpus[config.name].append(cpu)
        finally:
            for config in configs:
                config.close()
    for name in CONFIGS:
        out[name] = [statistics.median(walls[name]), statistics.median(cpus[name])]
        base = BASELINE.get(name)
        if base is not None:
            added = [a - b for a, b in zip(walls[name], walls[base], strict=True)]
            added_cpu = [a - b for a, b in zip(cpus[name], cpus[base], strict=True)]
            out[name] += [statistics.median(added), statistics.median(added_cpu)]
    return out


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--turns", type=int, default=4, help="turns per configuration per round")
    parser.add_argument("--calls", type=int, default=25, help="calls per turn")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    rounds, turns, calls = (2, 1, 5) if args.quick else (args.rounds, args.turns, args.calls)
    print(f"{rounds} rounds of {turns} turns of {calls} calls per configuration; medians of "
          "µs per call (wall, cpu) and of the µs per call added over the baseline")
    print("{:7} {:17} {:>8} {:>8} {:>9} {:>9}".format(
        "sync", "configuration", "µs/call", "cpu", "added", "added cpu"))
    for sync in ("normal", "full"):
        table = asyncio.run(measure(sync, rounds, turns, calls))
        for name in CONFIGS:
            wall, cpu, *added = table[name]
            extra = "{:>9.1f} {:>9.1f}".format(*added) if added else ""
            print(f"{sync:7} {name:17} {wall:>8.1f} {cpu:>8.1f} {extra}")


if __name__ == "__main__":
    main()
