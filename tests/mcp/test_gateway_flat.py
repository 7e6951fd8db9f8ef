"""A long session stays flat: 10,000 calls of one principal, forwarded to the counting fixture
server, roll over to a new turn every 500 calls with the counts carried; after the first
roll-over the store holds the same number of rows and the process's memory (traced by
``tracemalloc`` and its RSS) does not grow with the calls. Counts carried: a limit set across
roll-overs holds at its number, and a call repeated across a roll-over is still a repeat."""

from __future__ import annotations

import gc
import os
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from loopware_cli._gateway import Gateway
from loopware_cli._gateway_config import GatewayConfig, UpstreamConfig
from tests.mcp.conftest import fixture_command, logged

ROLL_OVER = 500


@asynccontextmanager
async def gateway_over(call_log: Path | None, **options: object) -> AsyncIterator[Gateway]:
    upstream = UpstreamConfig(name="fixture", server=tuple(fixture_command(call_log)), prefix="fx_")
    config = GatewayConfig(upstreams=(upstream,), roll_over=ROLL_OVER, **options)  # type: ignore[arg-type]
    gateway = Gateway(config)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.aclose()


def rss_bytes() -> int:
    """This process's resident set size now (Linux ``/proc``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


async def test_ten_thousand_calls_keep_memory_and_store_rows_flat() -> None:
    calls = 10_000
    samples: dict[int, tuple[int, int, int]] = {}
    async with gateway_over(None, repetition=3, total=1_000_000) as gateway:
        session = gateway.session("p")
        tracemalloc.start()
        try:
            for n in range(1, calls + 1):
                record, _ = await gateway.call("p", "fx_echo", {"text": f"call {n}"})
                assert not record.is_error
                if n % 1_000 == 0:
                    gc.collect()
                    traced, _ = tracemalloc.get_traced_memory()
                    samples[n] = (gateway.store.rows(), traced, rss_bytes())
                assert session.calls_in_turn <= ROLL_OVER
        finally:
            tracemalloc.stop()
    rows = {n: sample[0] for n, sample in samples.items()}
    assert len(set(rows.values())) == 1, rows  # the same rows from 1,000 calls to 10,000
    assert rows[calls] == ROLL_OVER + 2  # the window of calls, the latest message and turn
    first, last = samples[2_000], samples[calls]  # measured: +3 kB traced, +0.3 MB RSS
    assert last[1] - first[1] < 200_000, samples  # traced: under 25 bytes per call more
    assert last[2] - first[2] < 8_000_000, samples  # RSS: allocator noise, not growth


async def test_limits_and_repetition_carry_across_roll_overs(call_log: Path) -> None:
    async with gateway_over(call_log, limits={"fx_count": 3}, repetition=3) as gateway:
        answers = []
        for n in range(4 * ROLL_OVER):
            if n % ROLL_OVER == ROLL_OVER - 1:  # the last call of each turn
                record, _ = await gateway.call("p", "fx_count", {})
                answers.append(record.is_error)
            else:
                await gateway.call("p", "fx_nothing", {"n": n})  # no such tool: a quick call
        repeated = [(await gateway.call("p", "fx_picture", {}))[0].is_error for _ in range(2)]
        for n in range(ROLL_OVER - 1):  # the turn rolls over between the repeats
            await gateway.call("p", "fx_nothing", {"n": n})
        third, _ = await gateway.call("p", "fx_picture", {})
    assert answers == [False, False, False, True]  # one per turn: the fourth is over
    assert repeated == [False, False]
    assert third.is_error  # the third identical call, across a roll-over
    assert [c["tool"] for c in logged(call_log)] == ["count"] * 3 + ["picture"] * 2
