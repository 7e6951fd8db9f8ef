"""``loopware worker --config FILE``: a process that runs queued durable turns until stopped.

It builds a `DurableTurnRunner` from the file (``_worker_config.py``), launches DBOS (which
resumes this worker's unfinished turns), puts the turns of the workers named in ``recover`` back
on the queue, logs one line per turn started, completed, failed or waiting on a gate (logger
``loopware.worker``, printed on stdout: ``_worker_log.py``), and runs until SIGTERM or SIGINT.
Stopping leaves unfinished turns pending for the next worker.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Final, TextIO

from pipeline.durable import DurableTurnRunner
from pipeline.errors import LoopError, MissingExtraError

from ._worker_config import WorkerConfig, build_runner_options, read_worker_config
from ._worker_log import LOGGER, TurnLog

__all__ = ["add_worker_arguments", "run_worker"]

_EXIT_OK: Final = 0  # loopware_cli/_main.py EXIT_OK
_EXIT_BAD_INPUT: Final = 3  # EXIT_BAD_INPUT: the configuration file is unusable

WORKER_DESCRIPTION: Final = """\
Run queued durable turns (docs/guides/durable.md) until SIGTERM or
SIGINT. FILE is a TOML file: system_database (sqlite:///... by default, postgresql://...
for several workers), queue, concurrency, executor_id, recover, and a [runner] table
(model or model_from, tools, middleware, store or store_from, spool, system_prompt,
max_iterations). One line per turn is printed (logger loopware.worker), each ending
with the queue's depth: `turn started: TURN`, `turn completed: TURN in 1.20s`,
`turn failed: TURN in 0.40s CODE: message`, and for each gate a turn waits on,
`gate waiting: GATE_ID REASON PAYLOAD`; settle it with `loopware approve GATE_ID`."""


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


def _handler(out: TextIO) -> logging.Handler:
    """Where the worker's lines go: ``out``, one message per line (no prefix)."""
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


async def serve(config: WorkerConfig, recover: list[str], out: TextIO) -> int:
    """Run the worker until a stop signal, logging to ``loopware.worker`` (printed on ``out``)."""
    logger = logging.getLogger(LOGGER)
    handler = _handler(out)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    log = TurnLog(logger)
    try:
        options = build_runner_options(config)
        runner = DurableTurnRunner(**options, on_gate=log.gate)
        log.attach(runner)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await runner.launch()
        log.start()
        try:
            dead = [*config.recover, *recover]
            if dead:
                resumed = await runner.recover(dead)
                log.say(f"recovered {len(resumed)} turn(s) of {', '.join(dead)}")
            log.say(
                f"worker ready: executor={config.executor_id or 'local'} queue={config.queue} "
                f"concurrency={config.concurrency}"
            )
            await stop.wait()
            await log.stop()
        finally:
            runner.shutdown()
        log.say("worker stopped")
    finally:
        logger.removeHandler(handler)
    return _EXIT_OK


def run_worker(args: argparse.Namespace) -> int:
    """The ``loopware worker`` command."""
    try:
        config = read_worker_config(args.config)
        return asyncio.run(serve(config, list(args.recover), sys.stdout))
    except MissingExtraError:  # told once, by main(): exit 7
        raise
    except LoopError as exc:
        print(f"loopware worker: error: {exc}", file=sys.stderr)
        return _EXIT_BAD_INPUT
