"""One connection's call deadlines under one timer (pipeline/mcp/_deadlines.py): a call past
its deadline raises `TimeoutError` as under ``asyncio.timeout``, calls that end in time arm no
new timer, the timer re-arms at the earliest deadline left, and a cancellation from elsewhere
stays a cancellation. The loop's clock is a fake one moved by hand: nothing here is timed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pipeline.mcp._deadlines import Deadlines


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

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        for _ in range(5):  # the timer runs, then the cancelled task
            await asyncio.sleep(0)


@pytest.fixture
async def clock() -> AsyncIterator[Clock]:
    loop = asyncio.get_running_loop()
    try:
        yield Clock(loop)
    finally:
        del loop.time, loop.call_at  # the class's own methods again


async def bounded(deadlines: Deadlines, seconds: float | None, wait: asyncio.Event) -> str:
    async with deadlines.after(seconds):
        await wait.wait()
    return "done"


async def started(deadlines: Deadlines, seconds: float) -> asyncio.Task[str]:
    """A task waiting forever under a deadline, once it has entered the block."""
    task = asyncio.create_task(bounded(deadlines, seconds, asyncio.Event()))
    await asyncio.sleep(0)
    return task


async def test_a_call_past_its_deadline_raises_timeout_error(clock: Clock) -> None:
    deadlines = Deadlines()
    task = await started(deadlines, 5)
    await clock.advance(4.9)
    assert not task.done()
    await clock.advance(0.2)
    with pytest.raises(TimeoutError):
        await task
    assert task.cancelling() == 0
    assert deadlines.live == 0


async def test_calls_that_end_in_time_share_one_timer(clock: Clock) -> None:
    deadlines = Deadlines()
    for _ in range(50):
        done = asyncio.Event()
        done.set()
        assert await bounded(deadlines, 5, done) == "done"
        clock.now += 0.01
    assert clock.armed == [1005.0]
    assert deadlines.live == 0


async def test_the_timer_re_arms_at_the_earliest_deadline_left(clock: Clock) -> None:
    deadlines = Deadlines()
    first = asyncio.Event()
    first.set()
    await bounded(deadlines, 5, first)  # arms at 1005, then ends
    clock.now += 3
    late = await started(deadlines, 5)  # due at 1008
    await clock.advance(2.5)  # 1005.5: the timer fires, nothing is due, it re-arms
    assert not late.done()
    assert clock.armed == [1005.0, 1008.0]
    await clock.advance(3)
    with pytest.raises(TimeoutError):
        await late


async def test_a_shorter_deadline_arms_an_earlier_timer(clock: Clock) -> None:
    deadlines = Deadlines()
    slow = await started(deadlines, 60)
    quick = await started(deadlines, 1)
    await clock.advance(1.5)
    with pytest.raises(TimeoutError):
        await quick
    assert not slow.done()
    assert clock.armed == [1060.0, 1001.0, 1060.0]
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow


async def test_a_cancellation_from_elsewhere_stays_a_cancellation(clock: Clock) -> None:
    deadlines = Deadlines()
    task = await started(deadlines, 5)
    clock.now += 10
    await asyncio.sleep(0)  # this step runs in the loop turn whose timer then expires the call
    task.cancel()  # the caller gives up in that same turn
    await clock.advance(0)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deadlines.live == 0


async def test_no_limit_arms_no_timer(clock: Clock) -> None:
    deadlines = Deadlines()
    done = asyncio.Event()
    done.set()
    assert await bounded(deadlines, None, done) == "done"
    assert clock.armed == []
