"""`ToolLoopExecutor`: the standard executor (model call, tool calls, storage, ack).

It uses the public `DispatchContext` API only (``run_tool``, ``store_tool_call``,
``store_message``, ``ack``): a custom executor can do everything it does.
docs/guides/executor.md shows one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._turn_state import uncancellable
from .calls._outcome import DEFAULT_INLINE_LIMIT
from .calls._toolcall import ToolCall
from .errors import TurnAbortedError
from .models._message import new_message
from .models._seam import NO_USAGE, ChatModel, ProposedToolCall

if TYPE_CHECKING:
    from ._dispatch import DispatchContext

__all__ = ["DEFAULT_MAX_CALLS_PER_RESPONSE", "ToolLoopExecutor"]

DEFAULT_MAX_CALLS_PER_RESPONSE = 64
"""How many of one response's proposed calls run; the rest are answered with an error."""


class ToolLoopExecutor:
    """The standard executor: ask the model, run the calls it proposes, store them, ack.

    Per iteration it renders the visible tools, calls the model once, and for every proposed
    call runs ``ctx.run_tool(...)`` (parse, validate, run, build the record) and stores it. Bad
    arguments, unknown tools and failing handlers become error calls the model reads on the
    next iteration; they never end the turn. No proposed calls means the model answered: the
    text is stored as the assistant message and the dispatch is acked.

    Every id the assistant message announces gets a record: calls beyond
    ``max_calls_per_response`` are answered with an error and never run, and when the turn is
    aborted or cancelled mid-batch the running call and every later one are stored as errors
    ("the turn was aborted while/before this call ran") before the cancellation goes on.

    Args:
        model: Any `ChatModel`, or a model string such as ``"openai:gpt-4.1-mini"`` (see
            `pipeline.models.infer_model`).
        parallel_tool_calls: Run the calls proposed together concurrently (stored in proposal
            order either way).
        inline_limit: Text results up to this many UTF-8 bytes are shown to the model whole
            (``inline=True``); longer ones are shown as an artifact handle the model queries
            with artifact tools.
        max_calls_per_response: How many calls of one model response run (at least 1), or
            None for no cap; each call beyond it is stored as an error the model reads
            (``"Error: at most N tool calls per response; this one was not run."``).
    """

    __slots__ = ("inline_limit", "max_calls_per_response", "model", "parallel_tool_calls")

    def __init__(
        self,
        model: ChatModel | str,
        *,
        parallel_tool_calls: bool = False,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        max_calls_per_response: int | None = DEFAULT_MAX_CALLS_PER_RESPONSE,
    ) -> None:
        """Configure the executor (a model string is resolved by `pipeline.models.infer_model`)."""
        if isinstance(model, str):
            from .models._infer import infer_model  # provider SDKs load only when named

            model = infer_model(model)
        if not callable(getattr(model, "complete", None)):
            raise TypeError(f"model must implement ChatModel.complete, got {model!r}")
        limit: object = inline_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError("inline_limit must be a non-negative int")
        cap: object = max_calls_per_response
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError("max_calls_per_response must be an int >= 1 or None")
        self.model = model
        self.parallel_tool_calls = parallel_tool_calls
        self.inline_limit = inline_limit
        self.max_calls_per_response = max_calls_per_response

    def __repr__(self) -> str:
        """Show the model and options."""
        return (
            f"ToolLoopExecutor({self.model!r}, parallel_tool_calls={self.parallel_tool_calls}, "
            f"inline_limit={self.inline_limit}, "
            f"max_calls_per_response={self.max_calls_per_response})"
        )

    async def __call__(self, ctx: DispatchContext) -> None:
        """Run one iteration on ``ctx``."""
        await ctx.load_history()  # a long conversation loads off the event loop (once)
        response = await self.model.complete(ctx.model_request())
        usage = response.usage
        if usage is not NO_USAGE and usage != NO_USAGE:
            ctx.add_usage(usage)
        proposed = list(response.tool_calls)
        if not proposed:
            state = response.provider_state
            await ctx.store_message(new_message("assistant", response.text or "", (), state))
            ctx.ack()
            return
        first = proposed[0].id
        if len(proposed) == 1 and first and not ctx.is_call_id_taken(first):
            ids = [first]  # the common case, without the general search
        else:
            ids = unique_call_ids(ctx, proposed)
        message = new_message(
            "assistant", response.text or "", tuple(ids), response.provider_state
        )
        await ctx.store_message(message)
        limit = self.inline_limit
        cap = self.max_calls_per_response
        run = proposed if cap is None or len(proposed) <= cap else proposed[:cap]
        try:
            if self.parallel_tool_calls and len(run) > 1:
                await _run_together(ctx, run, ids, limit)
            else:
                for p, cid in zip(run, ids, strict=False):
                    if ctx.aborted:
                        break
                    call = await ctx.run_tool(p.name, p.arguments, call_id=cid, inline_limit=limit)
                    await ctx.store_tool_call(call)
            if len(run) < len(proposed):
                await _refuse_over_cap(ctx, proposed, ids, len(run))
        except (asyncio.CancelledError, TurnAbortedError):
            # Every id the assistant message announced gets a record, or providers refuse the
            # conversation's next turn (a tool_use without its tool_result).
            await uncancellable(_answer_unrun(ctx, proposed, ids))
            raise
        if ctx.aborted:
            await uncancellable(_answer_unrun(ctx, proposed, ids))


async def _run_together(
    ctx: DispatchContext, run: Sequence[ProposedToolCall], ids: Sequence[str], limit: int
) -> None:
    """Run one batch's calls concurrently and store them in proposal order."""
    tasks = [
        asyncio.ensure_future(ctx.run_tool(p.name, p.arguments, call_id=cid, inline_limit=limit))
        for p, cid in zip(run, ids, strict=False)
    ]
    try:
        calls = await asyncio.gather(*tasks)
        for call in calls:
            await ctx.store_tool_call(call)
    except BaseException as exc:
        await uncancellable(_settle(ctx, run, ids, tasks, exc))
        raise


async def _settle(
    ctx: DispatchContext,
    run: Sequence[ProposedToolCall],
    ids: Sequence[str],
    tasks: Sequence[asyncio.Future[ToolCall]],
    exc: BaseException,
) -> None:
    """After a parallel batch was interrupted: stop its calls, then answer each in order.

    An abort, a cancellation, a call raising `TurnAbortedError` (or an unexpected error) must
    not leave siblings running after the turn ends, nor lose the calls that already finished:
    those are stored as they are, every other one as abandoned (or, after an unexpected error,
    as failed in its batch).
    """
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)
    aborted = isinstance(exc, asyncio.CancelledError | TurnAbortedError) or ctx.aborted
    for p, cid, task in zip(run, ids, tasks, strict=False):
        if ctx.get_tool_call(cid) is not None:
            continue
        if not task.cancelled() and task.exception() is None:
            await ctx.store_tool_call(task.result())
        elif aborted:
            await ctx.store_tool_call(ctx.abandoned_call(cid, p.name))
        else:
            reason = f"{type(exc).__name__} in its batch"
            call = ctx.abandoned_call(cid, p.name, action="failed", reason=reason)
            await ctx.store_tool_call(call)


async def _refuse_over_cap(
    ctx: DispatchContext, proposed: Sequence[ProposedToolCall], ids: Sequence[str], cap: int
) -> None:
    """Answer every call beyond the per-response cap with an error; none of them runs."""
    reason = f"at most {cap} tool calls per response"
    text = f"Error: {reason}; this one was not run."
    for p, cid in zip(proposed[cap:], ids[cap:], strict=True):
        if ctx.aborted:
            return
        call = ctx.refused_call(cid, p.name, policy="loopware.executor", reason=reason, text=text)
        await ctx.store_tool_call(call)


async def _answer_unrun(
    ctx: DispatchContext, proposed: Sequence[ProposedToolCall], ids: Sequence[str]
) -> None:
    """Store a record for every announced call that has none (the turn was aborted)."""
    for p, cid in zip(proposed, ids, strict=True):
        if ctx.get_tool_call(cid) is None:
            await ctx.store_tool_call(ctx.abandoned_call(cid, p.name))


def unique_call_ids(ctx: DispatchContext, proposed: Sequence[ProposedToolCall]) -> list[str]:
    """Keep provider ids, but never reuse an id stored in this turn or its conversation.

    Missing ids are minted; a repeated one gets a ``-2``, ``-3``... suffix (providers pair a
    call with its result by id, so one id must name one call of the conversation). Turns of one
    conversation running at the same time do not see each other's ids: the store keys calls by
    turn and id, so neither call is lost.
    """
    ids: list[str] = []
    seen: set[str] = set()
    taken = ctx.is_call_id_taken
    for p in proposed:
        cid = p.id or ToolCall.new_id()
        if cid in seen or taken(cid):
            n = 2
            while (c := f"{cid}-{n}") in seen or taken(c):
                n += 1
            cid = c
        seen.add(cid)
        ids.append(cid)
    return ids


ToolLoopExecutor.__module__ = "pipeline"
