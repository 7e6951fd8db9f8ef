"""Gateway-wide caps: store-backed, windowed limits keyed by the principal (or the whole
gateway), checked before the call is forwarded. In process, in front of the counting fixture
server, on a clock moved by hand: a principal's cap holds, another principal's is its own, a
gateway-wide cap counts everyone, concurrent calls cannot pass a cap, and when the window has
passed the calls go through again. The refusal is typed (``E_CALL_DENIED``), names the count,
and the record keeps the reading the audit writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from loopware_cli._gateway import Gateway
from loopware_cli._gateway_config import GatewayConfig, UpstreamConfig
from loopware_cli._gateway_config_caps import parse_caps
from tests.mcp.conftest import fixture_command, logged, text_of


class HandClock:
    """Seconds since the epoch, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def capped(
    call_log: Path, caps: object, clock: HandClock
) -> AsyncIterator[Gateway]:
    upstream = UpstreamConfig(name="fixture", server=tuple(fixture_command(call_log)), prefix="fx_")
    config = GatewayConfig(upstreams=(upstream,), caps=parse_caps(caps), max_concurrent=20)
    gateway = Gateway(config, clock=clock)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.aclose()


async def calls(gateway: Gateway, principal: str, n: int, tag: str) -> list[bool]:
    """Whether each of ``n`` calls of ``principal`` was refused."""
    return [
        (await gateway.call(principal, "fx_echo", {"text": f"{tag} {i}"}))[0].is_error
        for i in range(n)
    ]


async def test_a_principal_cap_holds_per_principal_and_frees_when_the_window_passes(
    call_log: Path,
) -> None:
    clock = HandClock()
    async with capped(call_log, {"principal": {"per_minute": {"fx_echo": 3}}}, clock) as gateway:
        alice = await calls(gateway, "alice", 5, "a")
        bob = await calls(gateway, "bob", 5, "b")
        record, _ = await gateway.call("alice", "fx_echo", {"text": "over"})
        clock.now += 30
        still = await calls(gateway, "alice", 1, "half")
        clock.now += 31  # the first calls are out of the window now
        later = await calls(gateway, "alice", 4, "later")
    assert alice == [False] * 3 + [True] * 2
    assert bob == [False] * 3 + [True] * 2
    assert still == [True]
    assert later == [False] * 3 + [True]
    assert len(logged(call_log)) == 9
    assert text_of(record).startswith("Error: E_")
    assert "for this principal in the last 1 minute" in text_of(record)


async def test_a_gateway_cap_counts_every_principal(call_log: Path) -> None:
    clock = HandClock()
    caps = {"gateway": {"per_hour": {"total": 4}}}
    async with capped(call_log, caps, clock) as gateway:
        alice = await calls(gateway, "alice", 3, "a")
        bob = await calls(gateway, "bob", 3, "b")
        clock.now += 3601
        again = await calls(gateway, "bob", 1, "again")
    assert alice == [False] * 3
    assert bob == [False, True, True]
    assert again == [False]
    assert len(logged(call_log)) == 5


async def test_concurrent_calls_cannot_pass_a_cap_and_the_refusal_keeps_its_reading(
    call_log: Path,
) -> None:
    clock = HandClock()
    caps = {"principal": {"per_minute": {"total": 5}}}
    async with capped(call_log, caps, clock) as gateway:
        records = await asyncio.gather(
            *(gateway.call("alice", "fx_sleep", {"seconds": 0.1, "n": i}) for i in range(20))
        )
    assert sum(not record.is_error for record, _ in records) == 5
    assert len(logged(call_log)) == 5
    refused = [record for record, _ in records if record.is_error and not record.ran]
    readings = [d.limit for record in refused for d in record.decisions if d.limit is not None]
    assert readings, [record.decisions for record in refused]
    assert {(r.key, r.limit, r.window_s) for r in readings} == {("alice", 5, 60.0)}
