from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from pipeline import Gate
from pipeline.errors import (
    GateAbortedError,
    GateTimeoutError,
    InvalidGateError,
    InvalidGateResolutionError,
    LoopError,
    PolicyViolationError,
)


class Decision(BaseModel):
    approved: bool
    note: str = ""


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"id": "", "reason": "r"}, "id"),
        ({"id": "   ", "reason": "r"}, "id"),
        ({"id": 3, "reason": "r"}, "id"),
        ({"id": "g", "reason": ""}, "reason"),
        ({"id": "g", "reason": None}, "reason"),
        ({"id": "g", "reason": "r", "timeout": 0}, "timeout"),
        ({"id": "g", "reason": "r", "timeout": -1.5}, "timeout"),
        ({"id": "g", "reason": "r", "timeout": float("nan")}, "timeout"),
        ({"id": "g", "reason": "r", "timeout": float("inf")}, "timeout"),
        ({"id": "g", "reason": "r", "timeout": True}, "timeout"),
        ({"id": "g", "reason": "r", "timeout": "5"}, "timeout"),
        ({"id": "g", "reason": "r", "schema": object()}, "schema"),
    ],
    ids=[
        "empty-id",
        "blank-id",
        "int-id",
        "empty-reason",
        "none-reason",
        "zero-timeout",
        "negative-timeout",
        "nan-timeout",
        "inf-timeout",
        "bool-timeout",
        "str-timeout",
        "bad-schema",
    ],
)
def test_bad_parts_raise_invalid_gate_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    """Every malformed constructor argument raises InvalidGateError with the field named."""
    with pytest.raises(InvalidGateError) as info:
        Gate(**kwargs)
    assert info.value.field == field
    assert info.value.code == "E_INVALID_INITIAL_TURN_GATE_VALUE"
    assert field in info.value.message


def test_gate_exposes_its_parts_and_reports_public_module() -> None:
    """A gate keeps what it was built with, is open, and reports the `pipeline` module."""
    gate = Gate(id="g1", reason="needs approval", payload={"tool": "rm"}, timeout=2)
    assert (gate.id, gate.reason, gate.payload, gate.timeout) == (
        "g1",
        "needs approval",
        {"tool": "rm"},
        2.0,
    )
    assert gate.schema is None
    assert not gate.is_settled
    assert gate.result is None
    assert type(gate).__module__ == "pipeline"
    assert "open" in repr(gate)


async def test_resolve_returns_value_from_wait() -> None:
    """A waiter receives the value passed to resolve() once it is called."""
    gate = Gate(id="g", reason="r")
    waiter = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    assert gate.resolve({"ok": True}) is True
    assert await waiter == {"ok": True}
    assert gate.result == "resolved"
    assert gate.is_settled
    assert gate.error is None


async def test_settling_before_wait_is_seen_by_wait() -> None:
    """A gate resolved before anyone waits returns that value at once, every time."""
    gate = Gate(id="g", reason="r")
    gate.resolve(42)
    assert await gate.wait() == 42
    assert await gate.wait() == 42


def test_gate_can_be_built_and_settled_without_a_running_loop() -> None:
    """Building and settling a gate outside an event loop works and wait() sees it later."""
    gate = Gate(id="g", reason="r")
    gate.resolve("yes")
    assert asyncio.run(gate.wait()) == "yes"


async def test_schema_validates_and_converts_the_resolution() -> None:
    """With a schema, wait() returns the validated (converted) value."""
    gate = Gate(id="g", reason="r", schema=Decision)
    gate.resolve({"approved": True})
    value = await gate.wait()
    assert isinstance(value, Decision)
    assert value.approved is True


async def test_schema_invalid_resolution_raises_and_leaves_gate_open() -> None:
    """An invalid resolution raises InvalidGateResolutionError and a later valid one still wins."""
    gate = Gate(id="g", reason="r", schema=Literal["approve", "deny"])
    waiter = asyncio.ensure_future(gate.wait())
    with pytest.raises(InvalidGateResolutionError) as info:
        gate.resolve("maybe")
    assert info.value.gate_id == "g"
    assert info.value.errors
    assert not gate.is_settled
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.resolve("deny")
    assert await waiter == "deny"


async def test_reject_with_text_raises_policy_violation() -> None:
    """Rejecting with text makes wait() raise PolicyViolationError(policy="approval")."""
    gate = Gate(id="g", reason="r")
    gate.reject("not on a Friday")
    with pytest.raises(PolicyViolationError) as info:
        await gate.wait()
    assert info.value.message == "not on a Friday"
    assert info.value.policy == "approval"
    assert info.value.details == {"gate_id": "g"}
    assert gate.result == "rejected"


async def test_reject_without_error_names_the_gate() -> None:
    """Rejecting with nothing raises a PolicyViolationError that names the gate."""
    gate = Gate(id="deploy", reason="r")
    gate.reject()
    with pytest.raises(PolicyViolationError, match="deploy"):
        await gate.wait()


async def test_reject_with_loop_error_raises_that_error() -> None:
    """Rejecting with a LoopError makes wait() raise that very error."""
    gate = Gate(id="g", reason="r")
    error = LoopError("custom")
    gate.reject(error)
    with pytest.raises(LoopError) as info:
        await gate.wait()
    assert info.value is error


async def test_reject_with_other_exception_wraps_and_chains_it() -> None:
    """A non-loopware exception is wrapped in PolicyViolationError with it as the cause."""
    gate = Gate(id="g", reason="r")
    cause = RuntimeError("backend down")
    gate.reject(cause)
    with pytest.raises(PolicyViolationError) as info:
        await gate.wait()
    assert info.value.__cause__ is cause
    assert "backend down" in info.value.message


async def test_abort_raises_gate_aborted_error_in_waiter() -> None:
    """Aborting an open gate makes its waiter raise GateAbortedError carrying the reason."""
    gate = Gate(id="g", reason="r")
    waiter = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0)
    assert gate.abort("user left") is True
    with pytest.raises(GateAbortedError) as info:
        await waiter
    assert info.value.reason == "user left"
    assert "user left" in info.value.message
    assert gate.result == "aborted"


async def test_timeout_marks_gate_and_raises_gate_timeout_error() -> None:
    """A gate nobody settles times out: wait() raises GateTimeoutError and result is "timeout"."""
    gate = Gate(id="g", reason="r", timeout=0.02)
    with pytest.raises(GateTimeoutError) as info:
        await gate.wait()
    assert isinstance(info.value, TimeoutError)
    assert gate.result == "timeout"
    assert gate.resolve(1) is False
    with pytest.raises(GateTimeoutError):
        await gate.wait()


async def test_settled_before_timeout_does_not_time_out() -> None:
    """A gate resolved within its timeout returns the value and never becomes "timeout"."""
    gate = Gate(id="g", reason="r", timeout=5)
    asyncio.get_running_loop().call_later(0.01, gate.resolve, "ok")
    assert await gate.wait() == "ok"
    assert gate.result == "resolved"


@pytest.mark.parametrize(
    "first",
    ["resolve", "reject", "abort"],
    ids=["after-resolve", "after-reject", "after-abort"],
)
async def test_settling_twice_is_a_no_op(first: str) -> None:
    """Once settled, later resolve/reject/abort calls return False and change nothing."""
    gate = Gate(id="g", reason="r", schema=int)
    getattr(gate, first)(*([7] if first == "resolve" else []))
    outcome = gate.result
    assert gate.resolve(8) is False
    assert gate.resolve("not an int") is False  # no validation once settled
    assert gate.reject("late") is False
    assert gate.abort("late") is False
    assert gate.result == outcome
    if first == "resolve":
        assert await gate.wait() == 7
    else:
        with pytest.raises(LoopError) as info:
            await gate.wait()
        assert "late" not in info.value.message


async def test_cancelled_waiter_leaves_gate_open() -> None:
    """Cancelling a waiting task does not settle the gate; a new waiter still gets the value."""
    gate = Gate(id="g", reason="r")
    waiter = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not gate.is_settled
    gate.resolve("late")
    assert await gate.wait() == "late"


async def test_every_waiter_sees_the_same_outcome() -> None:
    """Several tasks waiting on one gate all wake with the resolved value."""
    gate = Gate(id="g", reason="r")
    waiters = [asyncio.ensure_future(gate.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    gate.resolve("v")
    assert await asyncio.gather(*waiters) == ["v", "v", "v"]


def test_gate_result_literal_is_public() -> None:
    """GateResult is exported and names every way a gate can be settled."""
    from typing import get_args

    from pipeline import GateResult

    assert get_args(GateResult) == ("resolved", "rejected", "aborted", "timeout")


async def test_gate_is_generic_at_run_time_too() -> None:
    """``Gate[Decision](...)`` builds an ordinary gate; the parameter changes no behaviour."""
    gate = Gate[Decision](id="g", reason="r", schema=Decision)
    assert type(gate) is Gate
    gate.resolve({"approved": False, "note": "no"})
    assert await gate.wait() == Decision(approved=False, note="no")
    assert gate.value == Decision(approved=False, note="no")


def test_invalid_resolution_errors_are_plain_dicts() -> None:
    """InvalidGateResolutionError.errors is a list of plain dicts that name the failing place."""
    gate = Gate(id="g", reason="r", schema=Decision)
    with pytest.raises(InvalidGateResolutionError) as info:
        gate.resolve({"approved": "perhaps"})
    assert [type(item) for item in info.value.errors] == [dict]
    assert info.value.errors[0]["loc"] == ("approved",)
    assert info.value.gate_id == "g"
