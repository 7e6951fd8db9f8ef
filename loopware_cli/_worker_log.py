"""The worker's log: one line per turn started, completed, failed or waiting on a gate.

Lines go to the ``loopware.worker`` logger (`LOGGER`), each ending with the queue's depth
(``queued=N``: turns enqueued and not yet taken by a worker, counted when the line is written).
They are written in the order their events happened, by one task that counts the queue before
each line (a query of the system database), so the turn's loop never waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, Final

from pipeline import Gate
from pipeline.durable import DurableTurnRunner
from pipeline.events import TurnEnd, TurnStart

__all__ = ["LOGGER", "TurnLog"]

LOGGER: Final = "loopware.worker"
"""The logger's name."""

_LEVELS: Final = {"completed": logging.INFO, "aborted": logging.WARNING, "failed": logging.ERROR}


class TurnLog:
    """Subscribes to a durable runner's turns and gates and logs a line for each."""

    __slots__ = ("_lines", "_logger", "_runner", "_task")

    def __init__(self, logger: logging.Logger | None = None) -> None:
        """Log to ``logger`` (default: `LOGGER`).

        Pass `gate` as the runner's ``on_gate``, then `attach` the runner, and `start` once it
        is launched.
        """
        self._runner: DurableTurnRunner | None = None
        self._logger = logger if logger is not None else logging.getLogger(LOGGER)
        self._lines: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def attach(self, runner: DurableTurnRunner) -> None:
        """Log the turns ``runner`` runs in this process."""
        self._runner = runner
        runner.on(TurnStart, self.started)
        runner.on(TurnEnd, self.ended)

    def __repr__(self) -> str:
        """Show the logger and how many lines wait to be written."""
        return f"TurnLog(logger={self._logger.name!r}, waiting={self._lines.qsize()})"

    def start(self) -> None:
        """Start writing lines (the runner must be launched: the queue is counted)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._write())

    async def stop(self) -> None:
        """Write the lines still waiting, then stop."""
        if self._task is not None:
            self._lines.put_nowait(None)
            await self._task
            self._task = None

    def say(self, line: str, level: int = logging.INFO) -> None:
        """Log ``line`` at once (the worker's own lines: ready, recovered, stopped)."""
        self._logger.log(level, line)

    def started(self, event: TurnStart) -> None:
        """``turn started: TURN [conversation=ID] queued=N``."""
        where = f" conversation={event.conversation_id}" if event.conversation_id else ""
        self._lines.put_nowait((logging.INFO, f"turn started: {event.turn_id}{where}"))

    def ended(self, event: TurnEnd) -> None:
        """``turn completed|failed|aborted: TURN in Ns [CODE: message] queued=N``."""
        error = f" {event.error}" if event.error is not None else ""
        line = f"turn {event.status}: {event.turn_id} in {event.duration_ms / 1000:.2f}s{error}"
        self._lines.put_nowait((_LEVELS.get(event.status, logging.INFO), line))

    def gate(self, gate_id: str, gate: Gate[Any]) -> None:
        """``gate waiting: GATE_ID REASON PAYLOAD queued=N`` (settle with loopware approve)."""
        payload = json.dumps(gate.payload, default=str, sort_keys=True)
        self._lines.put_nowait((logging.INFO, f"gate waiting: {gate_id} {gate.reason} {payload}"))

    async def _write(self) -> None:
        while (item := await self._lines.get()) is not None:
            level, line = item
            depth = "?"
            with contextlib.suppress(Exception):  # a count that fails never stops the log
                if self._runner is not None:
                    depth = str(await self._runner.queue_depth())
            self._logger.log(level, f"{line} queued={depth}")
