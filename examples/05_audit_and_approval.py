"""Approval gates and a tamper-evident audit log around a refund tool.

A scripted support agent looks up an order, then tries two refunds. `ApprovalGate` makes every
``refund`` wait for an approver (here: a function that allows refunds up to 100); the rejected
refund becomes an error the model reads. `AuditLog` writes a hash-chained row per tool call and
per turn, with the decision taken about each call, and `verify()` spots a row edited afterwards.
The turns and their tool calls are kept in a `SqliteStore`, so a second turn of the same
conversation sees the first one's calls.

Run: ``python examples/05_audit_and_approval.py``
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from middleware import ApprovalGate
from middleware.audit import AuditLog, JsonlAuditSink
from pipeline import Gate, ToolLoopExecutor, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import SqliteStore
from pipeline.testing import ScriptedModel


@tool
def lookup_order(order_id: str) -> str:
    """Return an order's status and amount."""
    return json.dumps({"order_id": order_id, "status": "delivered", "amount": 80})


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    return f"refunded {amount:.2f} on {order_id}"


def small_refunds_only(gate: Gate) -> bool:
    """Approve refunds of at most 100; anything larger is rejected."""
    amount = gate.payload["args"]["amount"]
    print(f"  approver: {gate.reason} (amount {amount}) -> {'yes' if amount <= 100 else 'no'}")
    return bool(amount <= 100)


def propose(call_id: str, name: str, **args: object) -> ProposedToolCall:
    return ProposedToolCall(id=call_id, name=name, arguments=json.dumps(args))


async def run(folder: Path) -> None:
    sink = JsonlAuditSink(folder / "audit.jsonl")
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[propose("c1", "lookup_order", order_id="A-17")]),
            ModelResponse(
                tool_calls=[
                    propose("c2", "refund", order_id="A-17", amount=80),
                    propose("c3", "refund", order_id="A-17", amount=800),
                ]
            ),
            ModelResponse(text="Refunded 80; the larger refund needs a manager."),
            ModelResponse(tool_calls=[propose("c4", "lookup_order", order_id="A-17")]),
            ModelResponse(text="The order is still delivered."),
        ]
    )
    async with SqliteStore(folder / "turns.sqlite") as store:
        runner = TurnRunner(
            executor=ToolLoopExecutor(model),
            tools=[lookup_order, refund],
            middleware=[ApprovalGate(["refund"], small_refunds_only), AuditLog(sink)],
            store=store,
        )
        first = await runner.run("Refund order A-17 please", conversation_id="ticket-9")
        print(f"turn 1: {first.status}: {first.output}")
        for call in first.tool_calls:
            outcome = "error" if call.is_error else "ok"
            print(f"  {call.id} {call.tool}({dict(call.args)}) -> {outcome}")
        second = await runner.run("Any news?", conversation_id="ticket-9")
        print(f"turn 2: {second.status}: {second.output}")
        earlier = len(model.requests[-1].tool_calls) - len(second.tool_calls)
        print(f"  turn 2 saw {earlier} calls from turn 1 in its conversation history")

    print("audit rows:")
    for row in sink.rows():
        entry = row.entry
        what = f"{entry.tool} {entry.decision}" if entry.kind == "tool_call" else entry.status
        print(f"  #{row.index} {entry.kind:9} {what:22} {row.hash[:12]}")
    print(f"verify(): {sink.verify().explain()}")
    sink.close()

    # Someone edits a row after the fact: the chain shows where.
    log = folder / "audit.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"rejected"', '"approved"')
    log.write_text("".join(lines))
    tampered = JsonlAuditSink(log)
    print(f"after editing row 2, verify(): {tampered.verify().explain()}")
    tampered.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))


if __name__ == "__main__":
    main()
