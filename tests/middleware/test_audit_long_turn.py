"""`AuditLog` in a turn that runs for long (the MCP gateway serves each client with one turn):
the rows' writes it keeps to settle at the turn's end stay bounded, and a write that failed
early is still reported when the turn ends."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Sequence

from middleware import AuditEntry, AuditHead, AuditLog, AuditRow
from pipeline import DispatchContext, Log, TurnRunner, tool

CALLS = 300


@tool
def search(q: str) -> str:
    """Search for ``q``."""
    return f"found {q}"


class _Sink:
    """Appends complete at once; the third one fails. Tracks the futures still alive."""

    def __init__(self) -> None:
        self.appended = 0
        self.alive: weakref.WeakSet[asyncio.Future[list[AuditRow]]] = weakref.WeakSet()

    def append(self, batch: Sequence[AuditEntry]) -> asyncio.Future[list[AuditRow]]:
        self.appended += 1
        done: asyncio.Future[list[AuditRow]] = asyncio.get_running_loop().create_future()
        if self.appended == 3:
            done.set_exception(OSError("disk full"))
        else:
            done.set_result([])
        self.alive.add(done)
        return done

    def rows(self) -> list[AuditRow]:
        return []

    def head(self) -> AuditHead:
        return AuditHead(0, "0" * 64)

    def verify(self, *, head: AuditHead | None = None) -> int | None:
        return None

    def close(self) -> None:
        return None


async def test_a_long_turn_keeps_few_finished_writes_and_still_reports_a_failed_one() -> None:
    sink = _Sink()
    alive_mid_turn: list[int] = []

    async def executor(ctx: DispatchContext) -> None:
        for n in range(CALLS):
            record = await ctx.run_tool("search", {"q": str(n)}, call_id=f"c{n}")
            await ctx.store_tool_call(record)
            await asyncio.sleep(0)  # the client's next call arrives in a later loop turn
        gc.collect()
        alive_mid_turn.append(len(sink.alive))
        ctx.ack()

    runner = TurnRunner(executor=executor, tools=[search], middleware=[AuditLog(sink)])
    logs: list[Log] = []
    runner.on(Log, logs.append)
    result = await runner.run("go")
    assert result.status == "completed"
    assert sink.appended == CALLS + 1  # a row per call and the turn's
    assert alive_mid_turn[0] < CALLS // 2, "every finished write kept to the turn's end"
    assert any(log.kind == "listener_error" and "disk full" in log.message for log in logs)
