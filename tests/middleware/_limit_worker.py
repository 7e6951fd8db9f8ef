"""A worker process for the scoped-limit tests: turns of one customer against a shared store.

Run as ``python -m tests.middleware._limit_worker MODE STORE LOG [N]``:

- ``MODE`` ``turns``: wait for ``LOG.go`` to exist (so every worker starts at once), then run
  ``N`` turns of customer ``cust-7`` concurrently, each proposing refunds in batches; every
  refund handler run appends a line to ``LOG`` (``O_APPEND`` and ``fsync``), which proves how
  many ran in all processes together.
- ``MODE`` ``hang``: run one turn whose refund handler writes ``started`` and then sleeps for
  ever, holding its reservation (the test kills the process with SIGKILL).

``STORE`` is an SQLite file or a PostgreSQL connection string. The limit: 10 refunds per
customer (``hang``: 1, with a reservation expiry of 30 seconds).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from middleware import ToolCallLimit
from pipeline import ToolLoopExecutor, TurnContext, TurnRunner, tool
from pipeline.models import ModelResponse, ProposedToolCall
from pipeline.stores import FileSpoolStore, PostgresStore, SqliteStore, TurnStore
from pipeline.testing import ScriptedModel

LIMIT = 10
HANG_TTL = timedelta(seconds=30)


def customer(ctx: TurnContext) -> str:
    """The turn's customer, from the stash the caller seeded."""
    return str(ctx.stash.get("customer"))


def append(log: Path, line: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def batch(prefix: str, n: int) -> ModelResponse:
    return ModelResponse(
        tool_calls=[
            ProposedToolCall(
                id=f"{prefix}{i}", name="refund", arguments=json.dumps({"order": f"{prefix}{i}"})
            )
            for i in range(n)
        ]
    )


def open_store(target: str, folder: Path) -> TurnStore:
    if target.endswith(".db"):
        return SqliteStore(target, synchronous="normal")
    return PostgresStore(target, spool=FileSpoolStore(folder / "spool"))


async def turns(target: str, log: Path, n: int) -> None:
    @tool
    async def refund(order: str) -> str:
        """Refund an order."""
        append(log, f"{os.getpid()} {order}")
        await asyncio.sleep(0.005)
        return f"refunded {order}"

    limit = ToolCallLimit({"refund": LIMIT}, scope=customer, scope_name="customer")
    store = open_store(target, log.parent)
    go = log.with_name(log.name + ".go")
    while not go.exists():
        time.sleep(0.01)

    async def one(i: int) -> None:
        model = ScriptedModel([batch(f"{os.getpid()}-{i}-a", 3), batch(f"{os.getpid()}-{i}-b", 2)])
        runner = TurnRunner(
            executor=ToolLoopExecutor(model), tools=[refund], middleware=[limit], store=store
        )
        await runner.run("refund", stash={"customer": "cust-7"}, conversation_id=f"c-{i}")

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()


async def hang(target: str, log: Path) -> None:
    @tool
    async def refund(order: str) -> str:
        """Refund an order, then never return."""
        append(log, "started")
        await asyncio.sleep(3600)
        return "never"

    limit = ToolCallLimit(
        {"refund": 1}, scope=customer, scope_name="customer", reservation_ttl=HANG_TTL
    )
    store = open_store(target, log.parent)
    runner = TurnRunner(
        executor=ToolLoopExecutor(ScriptedModel([batch("h", 1)])),
        tools=[refund],
        middleware=[limit],
        store=store,
    )
    await runner.run("refund", stash={"customer": "cust-7"})


def main() -> None:
    mode, target, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if mode == "turns":
        asyncio.run(turns(target, log, int(sys.argv[4])))
    else:
        asyncio.run(hang(target, log))


if __name__ == "__main__":
    main()
