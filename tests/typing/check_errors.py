"""Type checks for the LoopError tree's context attributes and families (checked by mypy, never
collected by pytest)."""

from __future__ import annotations

from typing import Any, assert_type

from pipeline.errors import (
    ConfigurationError,
    GateError,
    GateTimeoutError,
    InvalidMiddlewareConfigError,
    InvalidRunnerConfigError,
    InvalidStashValueError,
    InvalidToolArgsError,
    LoopError,
    PipelineError,
    PipelineShortCircuitedError,
    PolicyViolationError,
    ToolDownstreamError,
    ToolError,
    ToolNotFoundError,
    TurnAbortedError,
)


def fail() -> None:
    raise ToolNotFoundError("no such tool", tool_name="search")


# A caught error's declared context attributes are typed, without a cast or an ignore.
try:
    fail()
except ToolNotFoundError as err:
    assert_type(err.tool_name, str | None)
    assert_type(err.call_id, str | None)
    assert_type(err.code, str)
    assert_type(err.message, str)
except InvalidToolArgsError as err:
    assert_type(err.errors, list[dict[str, Any]])
    assert_type(err.field, str | None)
except ToolDownstreamError as err:
    assert_type(err.line, int | None)
    assert_type(err.format, str | None)
except PipelineShortCircuitedError as err:
    assert_type(err.stage, str | None)
except InvalidRunnerConfigError as err:
    assert_type(err.fields, list[str])
except InvalidMiddlewareConfigError as err:
    assert_type(err.option, str | None)
    assert_type(err.middleware, str | None)
except InvalidStashValueError as err:
    assert_type(err.path, str | None)
except GateTimeoutError as err:
    assert_type(err.gate_id, str | None)
    assert_type(err.timeout, float | None)
except PolicyViolationError as err:
    assert_type(err.policy, str)
    assert_type(err.details, dict[str, Any])
except TurnAbortedError as err:
    assert_type(err.turn_id, str | None)

# A family declares what all of its members carry.
try:
    fail()
except ToolError as err:
    assert_type(err.tool_name, str | None)
    assert_type(err.call_id, str | None)
except ConfigurationError as err:
    assert_type(err.field, str | None)
except PipelineError as err:
    assert_type(err.stage, str | None)
    assert_type(err.middleware, str | None)
except GateError as err:
    assert_type(err.gate_id, str | None)
except LoopError as err:
    assert_type(err.fatal, bool)
    _ = err.tool_name  # type: ignore[attr-defined]  # the root declares no context

# Declared keywords are typed; the message stays the only positional parameter.
ToolNotFoundError("m", tool_name=3)  # type: ignore[arg-type]
InvalidToolArgsError("m", errors="bad")  # type: ignore[arg-type]
PolicyViolationError("m", policy="p", details=["not", "a", "dict"])  # type: ignore[arg-type]
ToolNotFoundError("m", "search")  # type: ignore[call-arg]

# Other keywords are still accepted (LoopError's contract) and typed Any.
ToolDownstreamError("m", http_status=503)
LoopError("m", anything="goes")
