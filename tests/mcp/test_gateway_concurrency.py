"""A principal's calls run concurrently (bounded), each with its own deadline, and the policies
still hold before the handler: two 1.5 s calls take well under 3 s; a hanging call times out
with a typed error while another completes; 20 concurrent calls under a limit of 5 forward
exactly 5; with ``max_concurrent = 1`` calls run one at a time. In process, in front of the
counting fixture server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from loopware_cli._gateway import Gateway, call_result
from loopware_cli._gateway_config import GatewayConfig, UpstreamConfig
from tests.mcp.conftest import fixture_command, logged, text_of


@asynccontextmanager
async def gateway_over(
    call_log: Path, timeout: float = 30, **options: object
) -> AsyncIterator[Gateway]:
    upstream = UpstreamConfig(
        name="fixture", server=tuple(fixture_command(call_log)), prefix="fx_", timeout=timeout
    )
    gateway = Gateway(GatewayConfig(upstreams=(upstream,), **options))  # type: ignore[arg-type]
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.aclose()


async def test_two_slow_calls_of_one_principal_run_at_once(call_log: Path) -> None:
    async with gateway_over(call_log) as gateway:
        await gateway.call("p", "fx_echo", {"text": "warm"})
        started = time.monotonic()
        both = await asyncio.gather(
            gateway.call("p", "fx_sleep", {"seconds": 1.5, "n": 1}),
            gateway.call("p", "fx_sleep", {"seconds": 1.5, "n": 2}),
        )
        elapsed = time.monotonic() - started
    assert [record.is_error for record, _ in both] == [False, False]
    assert elapsed < 2.5, elapsed


async def test_a_hanging_call_times_out_typed_while_another_completes(call_log: Path) -> None:
    async with gateway_over(call_log, timeout=1.5) as gateway:
        hanging = asyncio.ensure_future(gateway.call("p", "fx_hang", {}))
        while not logged(call_log):  # the hanging call reached the upstream
            await asyncio.sleep(0.02)
        started = time.monotonic()
        record, _ = await gateway.call("p", "fx_echo", {"text": "meanwhile"})
        quick = time.monotonic() - started
        hung, _ = await hanging
    assert not record.is_error
    assert quick < 1.0, quick  # not held by the hanging call
    assert hung.is_error
    assert "E_MCP_TIMEOUT" in text_of(hung)
    assert call_result(hung, None).is_error


async def test_twenty_concurrent_calls_under_a_limit_of_five_forward_five(call_log: Path) -> None:
    async with gateway_over(call_log, limits={"fx_sleep": 5}, max_concurrent=20) as gateway:
        records = await asyncio.gather(
            *(gateway.call("p", "fx_sleep", {"seconds": 0.2, "n": i}) for i in range(20))
        )
    assert sum(not record.is_error for record, _ in records) == 5
    assert len(logged(call_log)) == 5


async def test_max_concurrent_one_runs_calls_one_at_a_time(call_log: Path) -> None:
    async with gateway_over(call_log, max_concurrent=1) as gateway:
        await gateway.call("p", "fx_echo", {"text": "warm"})
        started = time.monotonic()
        await asyncio.gather(
            gateway.call("p", "fx_sleep", {"seconds": 0.5, "n": 1}),
            gateway.call("p", "fx_sleep", {"seconds": 0.5, "n": 2}),
        )
        elapsed = time.monotonic() - started
    assert elapsed >= 1.0, elapsed


async def test_concurrency_is_bounded_per_principal(call_log: Path) -> None:
    """With ``max_concurrent = 3``, never more than 3 of the principal's calls are upstream."""
    async with gateway_over(call_log, max_concurrent=3) as gateway:
        session = gateway.session("p")
        seen: list[int] = []

        async def watch() -> None:
            while True:
                seen.append(session.running)
                await asyncio.sleep(0.01)

        watcher = asyncio.ensure_future(watch())
        records = await asyncio.gather(
            *(gateway.call("p", "fx_sleep", {"seconds": 0.2, "n": i}) for i in range(9))
        )
        watcher.cancel()
    assert all(not record.is_error for record, _ in records)
    assert max(seen) == 3
