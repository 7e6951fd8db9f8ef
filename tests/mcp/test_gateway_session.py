"""A gateway client's session (loopware_cli/_gateway.py): a session left idle past its timeout
ends its turn and the next call starts another in the same conversation; calls that keep
coming keep the turn, however long it runs, with one idle timer re-armed rather than one per
wait; a call queued (without a task) as its turn ends runs in the next one; a call whose
waiter is cancelled leaves the session working. The loop's clock is moved by hand: nothing is
timed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from loopware_cli._gateway import Gateway
from loopware_cli._gateway_config import GatewayConfig
from pipeline.hosted import HostedTurn


class Clock:
    """The running loop's clock, moved by hand; counts the timers armed on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.now = 1000.0
        self.armed: list[float] = []
        self._call_at = loop.call_at
        loop.time = lambda: self.now  # type: ignore[method-assign]
        loop.call_at = self._count  # type: ignore[method-assign,assignment]

    def _count(self, when: float, callback: object, *args: object, **kw: object) -> object:
        self.armed.append(when)
        return self._call_at(when, callback, *args, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def clock() -> AsyncIterator[Clock]:
    """The running loop's clock, by hand, for the test (the loop's own methods after)."""
    loop = asyncio.get_running_loop()
    try:
        yield Clock(loop)
    finally:
        del loop.time, loop.call_at  # the class's own methods again


async def turns(clock: Clock, seconds: float) -> None:
    clock.now += seconds
    for _ in range(50):
        await asyncio.sleep(0)


async def running_turn(gateway: Gateway) -> HostedTurn | None:
    """The conversation's turn after one call (none when no call ran yet)."""
    record, _ = await gateway.call("client", "nothing", {})
    assert record.is_error  # no such tool: the call still runs through the turn
    return gateway.session("client").turn


def ended(turn: Any) -> bool:
    """Whether ``turn`` has ended, read when called (not narrowed by an earlier read)."""
    return bool(turn.ended)


async def test_an_idle_session_ends_its_turn_and_the_next_call_starts_another(
    clock: Clock,
) -> None:
    gateway = Gateway(GatewayConfig(upstreams=(), session_idle_timeout=60))
    await gateway.start()
    first = await running_turn(gateway)
    assert first is not None
    await turns(clock, 59)
    assert not ended(first)
    await turns(clock, 2)
    assert ended(first)  # read afresh: the idle timer ended it meanwhile
    second = await running_turn(gateway)
    assert second is not first
    assert second is not None
    assert not second.ended
    await gateway.aclose()


async def test_calls_that_keep_coming_keep_the_turn_with_one_timer(clock: Clock) -> None:
    gateway = Gateway(GatewayConfig(upstreams=(), session_idle_timeout=60))
    await gateway.start()
    first = await running_turn(gateway)
    for _ in range(100):
        await turns(clock, 5)  # 500 s in all, never 60 s without a call
        assert await running_turn(gateway) is first
    assert first is not None
    assert not first.ended
    assert len(clock.armed) <= 10, "a timer per wait"  # one per 60 s: 9 (101 waits)
    await gateway.aclose()


async def test_a_call_queued_as_its_turn_ends_runs_in_the_next_turn() -> None:
    gateway = Gateway(GatewayConfig(upstreams=()))
    await gateway.start()
    first = await running_turn(gateway)
    session = gateway.session("client")
    closing = asyncio.create_task(session.close())  # the turn is told to end ...
    await asyncio.sleep(0)
    later = session.enqueue("nothing", {})  # ... and a call comes meanwhile
    record, _ = await later
    assert record.is_error  # it ran (no such tool)
    await closing
    second = session.turn
    assert second is not first
    await gateway.aclose()


async def test_a_call_whose_waiter_is_cancelled_leaves_the_session_working() -> None:
    gateway = Gateway(GatewayConfig(upstreams=()))
    await gateway.start()
    first = await running_turn(gateway)
    gone = gateway.session("client").enqueue("nothing", {})
    gone.cancel()  # the client gave up on it
    assert await running_turn(gateway) is first
    assert gone.cancelled()
    await gateway.aclose()


async def test_a_call_whose_batch_close_ended_the_turn_runs_in_the_next_turn() -> None:
    """A policy ends the turn as the last batch closes (``dispatch_output``): the call that
    closed it is not refused for it; it runs, once, in the principal's next turn."""
    from loopware_cli._gateway_session import Session
    from middleware import Middleware
    from pipeline import DispatchContext, tool
    from pipeline.hosted import HostedRunner

    runs: list[str] = []

    @tool
    async def echo(text: str) -> str:
        """Echo."""
        runs.append(text)
        return text

    stop = Middleware("one_batch")

    @stop.dispatch_output
    def end_after_batch(ctx: DispatchContext) -> None:
        if ctx.new_tool_calls:
            ctx.abort("one batch per turn")

    session = Session(
        "client",
        HostedRunner(tools=[echo], middleware=[stop]),
        roll_over=100,
        max_concurrent=4,
        idle_timeout=60,
    )
    first, _ = await session.call("echo", {"text": "one"})
    turn = session.turn
    second, _ = await session.call("echo", {"text": "two"})
    await session.close()

    assert runs == ["one", "two"]
    assert first.ran
    assert second.ran
    assert turn is not None
    assert turn.ended
    assert session.turn is not turn  # the second call ran in the next turn
