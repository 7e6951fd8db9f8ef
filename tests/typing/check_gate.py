"""Type checks for the generic Gate (checked by mypy, never collected by pytest)."""

from __future__ import annotations

from typing import Any, Literal, assert_type

from pydantic import BaseModel

from pipeline import Gate


class Approval(BaseModel):
    approved: bool
    note: str = ""


async def main() -> None:
    # A schema class types the gate and what wait() returns.
    gate = Gate(id="deploy", reason="deploys need a human", schema=Approval)
    assert_type(gate, Gate[Approval])
    assert_type(await gate.wait(), Approval)
    assert_type(gate.value, Approval | None)
    assert_type(await Gate(id="n", reason="r", schema=int).wait(), int)
    assert_type(await Gate(id="l", reason="r", schema=list[str]).wait(), list[str])

    # resolve() takes anything the schema may accept (it validates and converts).
    assert_type(gate.resolve({"approved": True}), bool)

    # Without a schema, a gate is Gate[Any]; a bare `Gate` annotation means the same.
    untyped = Gate(id="g", reason="r", payload={"tool": "rm"})
    assert_type(untyped, Gate[Any])
    assert_type(await untyped.wait(), Any)
    bare: Gate = untyped
    assert_type(bare, Gate[Any])

    # A special form (a Literal, a union) cannot be a type[T]: the gate is Gate[Any] unless the
    # parameter is written out.
    assert_type(Gate(id="c", reason="r", schema=Literal["yes", "no"]), Gate[Any])
    choice = Gate[Literal["yes", "no"]](id="c", reason="r", schema=Literal["yes", "no"])
    assert_type(await choice.wait(), Literal["yes", "no"])

    # A typed gate does not become another type's gate.
    other: Gate[int] = gate  # type: ignore[assignment]
    del other

    # Parts stay keyword-only and typed.
    Gate("deploy", "reason")  # type: ignore[call-overload]
    Gate(id="g", reason="r", timeout="5")  # type: ignore[call-overload]
