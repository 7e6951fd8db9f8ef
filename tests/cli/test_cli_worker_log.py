"""The worker's log: one line per turn started, completed, failed or waiting on a gate, in the
order the events happened, on the ``loopware.worker`` logger, each with the queue's depth."""

from __future__ import annotations

import logging

import pytest

from loopware_cli._worker_log import LOGGER, TurnLog
from pipeline import Gate
from pipeline.durable import DurableTurnRunner
from pipeline.errors import PolicyViolationError
from pipeline.events import TurnEnd, TurnStart
from pipeline.testing import ScriptedModel


async def test_each_turn_gets_a_line_per_event_in_order_with_its_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Started, completed, failed (with the error's code) and gate lines reach the logger in
    order; a queue that cannot be counted (a runner not launched) shows ``queued=?``."""
    log = TurnLog()
    log.attach(DurableTurnRunner(model=ScriptedModel([])))
    log.start()
    log.started(TurnStart(turn_id="t1", input="hi", conversation_id="c1"))
    gate: Gate[bool] = Gate(id="g1", reason="approve the refund", payload={"order": "A1"})
    log.gate("t1:gate-1", gate)
    log.ended(TurnEnd(turn_id="t1", status="completed", duration_ms=1200.0))
    failure = PolicyViolationError("token budget: 900 used", policy="p")
    log.ended(TurnEnd(turn_id="t2", status="failed", duration_ms=400.0, error=failure))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await log.stop()
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (LOGGER, logging.INFO, "turn started: t1 conversation=c1 queued=?"),
        (
            LOGGER,
            logging.INFO,
            'gate waiting: t1:gate-1 approve the refund {"order": "A1"} queued=?',
        ),
        (LOGGER, logging.INFO, "turn completed: t1 in 1.20s queued=?"),
        (
            LOGGER,
            logging.ERROR,
            "turn failed: t2 in 0.40s E_POLICY_VIOLATION: token budget: 900 used queued=?",
        ),
    ]
