"""``loopware worker --config FILE``: a process that runs queued durable turns until stopped.

It builds a `DurableTurnRunner` from the file (``_worker_config.py``), launches DBOS (which
resumes this worker's unfinished turns), puts the turns of the workers named in ``recover`` back
on the queue, prints one line per gate a turn starts waiting on, and runs until SIGTERM or
SIGINT. Stopping leaves unfinished turns pending for the next worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any, Final, TextIO

from pipeline import Gate
from pipeline.durable import DurableTurnRunner
from pipeline.errors import LoopError

from ._worker_config import WorkerConfig, build_runner_options, read_worker_config

__all__ = ["add_worker_arguments", "run_worker"]

_EXIT_OK: Final = 0  # loopware_cli/_main.py EXIT_OK
_EXIT_BAD_INPUT: Final = 3  # EXIT_BAD_INPUT: the configuration file is unusable

WORKER_DESCRIPTION: Final = """\
Run queued durable turns (docs/guides/durable.md) until SIGTERM or
SIGINT. FILE is a TOML file: system_database (sqlite:///... by default, postgresql://...
for several workers), queue, concurrency, executor_id, recover, and a [runner] table
(model or model_from, tools, middleware, store or store_from, spool, system_prompt,
max_iterations). Each gate a turn waits on is printed as `gate waiting: GATE_ID ...`;
settle it with `loopware approve GATE_ID`."""


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``loopware worker``."""
    parser.add_argument("--config", required=True, metavar="FILE", help="the worker's TOML file")
    parser.add_argument(
        "--recover",
        action="append",
        default=[],
        metavar="EXECUTOR_ID",
        help="put this dead worker's unfinished turns back on the queue (repeatable)",
    )


def _say(out: TextIO, line: str) -> None:
    out.write(line + "\n")
    out.flush()


def _gate_line(out: TextIO) -> Any:
    def on_gate(gate_id: str, gate: Gate[Any]) -> None:
        payload = json.dumps(gate.payload, default=str, sort_keys=True)
        _say(out, f"gate waiting: {gate_id} {gate.reason} {payload}")

    return on_gate


async def serve(config: WorkerConfig, recover: list[str], out: TextIO) -> int:
    """Run the worker until a stop signal."""
    options = build_runner_options(config)
    runner = DurableTurnRunner(**options, on_gate=_gate_line(out))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await runner.launch()
    try:
        dead = [*config.recover, *recover]
        if dead:
            resumed = await runner.recover(dead)
            _say(out, f"recovered {len(resumed)} turn(s) of {', '.join(dead)}")
        _say(
            out,
            f"worker ready: executor={config.executor_id or 'local'} queue={config.queue} "
            f"concurrency={config.concurrency}",
        )
        await stop.wait()
    finally:
        runner.shutdown()
    _say(out, "worker stopped")
    return _EXIT_OK


def run_worker(args: argparse.Namespace) -> int:
    """The ``loopware worker`` command."""
    try:
        config = read_worker_config(args.config)
        return asyncio.run(serve(config, list(args.recover), sys.stdout))
    except LoopError as exc:
        print(f"loopware worker: error: {exc}", file=sys.stderr)
        return _EXIT_BAD_INPUT
