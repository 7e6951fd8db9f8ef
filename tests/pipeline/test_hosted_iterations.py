"""A hosted turn's batches are closed in the host's own task (pipeline/hosted/_iterations.py).

The host closes a batch (`HostedTurn.end_batch`): that batch's ``dispatch_output`` and the next
iteration's ``dispatch_input`` run in the host's task, calls arriving meanwhile wait for the next
iteration, and a step that ends the dispatch ends the turn.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from middleware import Middleware
from pipeline import DispatchContext
from pipeline.events import IterationEnd, IterationStart
from pipeline.hosted import HostedRunner, HostTool

TOOL = HostTool("echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}})
HOST: contextvars.ContextVar[str] = contextvars.ContextVar("host", default="not the host's")


async def _echo(args: dict[str, Any]) -> object:
    return args


async def test_dispatch_output_runs_in_the_hosts_context_and_sees_its_batch() -> None:
    """``dispatch_output`` and the next ``dispatch_input`` run in the task that closed the batch
    (a context variable the host set is visible), each output seeing its own batch's calls."""
    mw = Middleware("probe")
    seen: list[tuple[str, str, list[str]]] = []

    @mw.dispatch_output
    async def output(ctx: DispatchContext) -> None:
        seen.append(("output", HOST.get(), [c.id for c in ctx.new_tool_calls]))

    @mw.dispatch_input
    async def input_(ctx: DispatchContext) -> None:
        seen.append(("input", HOST.get(), []))

    runner = HostedRunner(middleware=[mw])
    turn = await runner.begin("go")
    HOST.set("host")
    turn.offer([TOOL])
    await turn.call("a", "echo", {"text": "1"}, _echo)
    await turn.end_batch()
    await turn.call("b", "echo", {"text": "2"}, _echo)
    await turn.end_batch()
    result = await turn.finish()
    assert seen[1:] == [
        ("output", "host", ["a"]),
        ("input", "host", []),
        ("output", "host", ["b"]),
        ("input", "host", []),
    ]
    assert result.status == "completed"
    assert result.iterations == 3


async def test_a_call_made_while_a_batch_closes_is_stored_in_the_next_iteration() -> None:
    """A call arriving while ``dispatch_output`` of the last batch still runs waits: it is not
    one of the closing batch's calls, and the next batch's output sees it."""
    mw = Middleware("probe")
    release = asyncio.Event()
    batches: list[list[str]] = []

    @mw.dispatch_output
    async def output(ctx: DispatchContext) -> None:
        batches.append([c.id for c in ctx.new_tool_calls])
        if len(batches) == 1:
            await release.wait()

    runner = HostedRunner(middleware=[mw])
    turn = await runner.begin("go")
    turn.offer([TOOL])
    await turn.call("a", "echo", {"text": "1"}, _echo)
    closing = asyncio.create_task(turn.end_batch())
    await asyncio.sleep(0)
    late = asyncio.create_task(turn.call("b", "echo", {"text": "2"}, _echo))
    await asyncio.sleep(0)
    assert not late.done()  # it waits for the next iteration
    release.set()
    await closing
    assert (await late).forwarded
    await turn.end_batch()
    await turn.finish()
    assert batches == [["a"], ["b"]]


async def test_iteration_events_pair_up_across_batches_closed_by_the_host() -> None:
    """Each iteration the host's batches make emits one `IterationStart` and one `IterationEnd`,
    in order, with consecutive indices."""
    runner = HostedRunner()
    events: list[tuple[str, int]] = []
    runner.runner.on(IterationStart, lambda e: events.append(("start", e.iteration)))
    runner.runner.on(IterationEnd, lambda e: events.append(("end", e.iteration)))
    turn = await runner.begin("go")
    turn.offer([TOOL])
    for n in range(3):
        await turn.call(f"c{n}", "echo", {"text": str(n)}, _echo)
        await turn.end_batch()
    await turn.finish()
    assert events == [(kind, i) for i in range(4) for kind in ("start", "end")]


async def test_a_nack_in_the_closing_batch_ends_the_turn_before_end_batch_returns() -> None:
    """A ``dispatch_output`` middleware that nacks ends the turn as the host closes the batch:
    `end_batch` returns with the turn ended, and a later call is late (neither run nor stored)."""
    mw = Middleware("probe")

    @mw.dispatch_output
    async def stop(ctx: DispatchContext) -> None:
        ctx.nack()

    runner = HostedRunner(middleware=[mw])
    turn = await runner.begin("go")
    turn.offer([TOOL])
    await turn.call("a", "echo", {"text": "1"}, _echo)
    await turn.end_batch()
    assert turn.ended
    after = await turn.call("b", "echo", {"text": "2"}, _echo)
    assert after.late
    result = await turn.finish()
    assert result.status == "failed"
    assert [c.id for c in result.tool_calls] == ["a"]


async def test_a_host_cancelled_while_closing_a_batch_ends_the_turn_without_a_second_output() -> (
    None
):
    """The host's task is cancelled while the batch's ``dispatch_output`` runs: that output is
    not run again for the same batch, and the turn ends with the interruption named."""
    mw = Middleware("probe")
    entered = asyncio.Event()
    outputs: list[list[str]] = []

    @mw.dispatch_output
    async def output(ctx: DispatchContext) -> None:
        outputs.append([c.id for c in ctx.new_tool_calls])
        entered.set()
        await asyncio.sleep(3600)  # until the host's task is cancelled

    runner = HostedRunner(middleware=[mw])
    turn = await runner.begin("go")
    turn.offer([TOOL])
    await turn.call("a", "echo", {"text": "1"}, _echo)
    closing = asyncio.ensure_future(turn.end_batch())
    await asyncio.wait_for(entered.wait(), 10.0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):  # the host's own cancellation goes through
        await closing
    result = await turn.finish()
    assert outputs == [["a"]]
    assert result.status == "failed"
    assert [c.id for c in result.tool_calls] == ["a"]
    assert any("iteration change was interrupted" in str(e) for e in result.errors)
