"""Type checks for durable turns (checked by mypy, never collected by pytest)."""

from __future__ import annotations

from typing import Any, assert_type

from pipeline import Tool, tool
from pipeline.durable import (
    DurableClient,
    DurableConfigError,
    DurableTurnOutcome,
    DurableTurnRunner,
    GateNotWaitingError,
    ToolInterruptedError,
    WaitingGate,
    durable_tool,
)
from pipeline.errors import ConfigurationError, GateError, ToolError


@tool
def ping() -> str:
    """Ping."""
    return "pong"


async def outcome(runner: DurableTurnRunner, client: DurableClient) -> None:
    turn_id = await runner.enqueue("hi", conversation_id="c1")
    assert_type(turn_id, str)
    done = await runner.result(turn_id)
    assert_type(done, DurableTurnOutcome)
    assert_type(done["status"], str)
    assert_type(done["output"], str | None)
    assert_type(client.waiting_gates(), list[WaitingGate])
    assert_type(client.outcomes([turn_id]), dict[str, DurableTurnOutcome])
    await runner.settle("t:gate-1", approve=False, reason="no")
    await runner.enqueue(42)  # type: ignore[arg-type]
    done["stats"]  # type: ignore[typeddict-item]


def families() -> None:
    assert_type(durable_tool(ping), Tool[Any])
    config: ConfigurationError = DurableConfigError("bad")
    gate: GateError = GateNotWaitingError("x", gate_id="t:gate-1")
    interrupted: ToolError = ToolInterruptedError("x", tool_name="ping")
    assert_type(gate.gate_id, str | None)
    del config, interrupted
    DurableTurnRunner(model="openai:gpt-4.1-mini", concurrency="8")  # type: ignore[arg-type]
