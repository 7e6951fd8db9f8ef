"""`ToolLoopExecutor`: the standard executor (model call, tool calls, storage, ack).

It uses the public `DispatchContext` API only (``run_tool``, ``store_tool_call``,
``store_message``, ``ack``): a custom executor can do everything it does. The README's "Write
your own executor" section shows one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ._call_records import DEFAULT_INLINE_LIMIT, error_call
from ._events import ModelTextDelta
from ._toolcall import ToolCall
from .models._seam import NO_USAGE, ChatModel, Message, ModelRequest, ProposedToolCall

if TYPE_CHECKING:
    from ._dispatch import DispatchContext

__all__ = ["ToolLoopExecutor"]


class ToolLoopExecutor:
    """The standard executor: ask the model, run the calls it proposes, store them, ack.

    Per iteration it renders the visible tools, calls the model once, and for every proposed
    call runs ``ctx.run_tool(...)`` (parse, validate, run, build the record) and stores it. Bad
    arguments, unknown tools and failing handlers become error calls the model reads on the
    next iteration; they never end the turn. No proposed calls means the model answered: the
    text is stored as the assistant message and the dispatch is acked.

    Args:
        model: Any `ChatModel`, or a model string such as ``"openai:gpt-4.1-mini"`` (see
            `pipeline.models.infer_model`).
        parallel_tool_calls: Run the calls proposed together concurrently (stored in proposal
            order either way).
        inline_limit: Text results up to this many UTF-8 bytes are shown to the model whole
            (``inline=True``); longer ones are shown as an artifact handle the model queries
            with artifact tools.
    """

    __slots__ = ("inline_limit", "model", "parallel_tool_calls")

    def __init__(
        self,
        model: ChatModel | str,
        *,
        parallel_tool_calls: bool = False,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
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
        self.model = model
        self.parallel_tool_calls = parallel_tool_calls
        self.inline_limit = inline_limit

    def __repr__(self) -> str:
        """Show the model and options."""
        return (
            f"ToolLoopExecutor({self.model!r}, parallel_tool_calls={self.parallel_tool_calls}, "
            f"inline_limit={self.inline_limit})"
        )

    async def __call__(self, ctx: DispatchContext) -> None:
        """Run one iteration on ``ctx``."""
        tools = ctx.tools
        request = ModelRequest(
            ctx.system_prompt,
            tuple(ctx.messages),
            tuple(ctx.tool_calls),
            tuple(t.definition for t in tools.visible()),
            turn_id=ctx.turn_id,
            registry=tools,
            on_text_delta=_streamer(ctx) if ctx.listens_for(ModelTextDelta) else None,
        )
        response = await self.model.complete(request)
        usage = response.usage
        if usage is not NO_USAGE and usage != NO_USAGE:
            ctx.add_usage(usage)
        proposed = list(response.tool_calls)
        if not proposed:
            await ctx.store_message(Message(role="assistant", content=response.text or ""))
            ctx.ack()
            return
        ids = unique_call_ids(ctx, proposed)
        await ctx.store_message(
            Message(role="assistant", content=response.text or "", tool_call_ids=tuple(ids))
        )
        limit = self.inline_limit
        if self.parallel_tool_calls and len(proposed) > 1:
            tasks = [
                asyncio.ensure_future(
                    ctx.run_tool(p.name, p.arguments, call_id=cid, inline_limit=limit)
                )
                for p, cid in zip(proposed, ids, strict=True)
            ]
            try:
                calls = await asyncio.gather(*tasks)
            except asyncio.CancelledError:
                raise  # gather has cancelled every call
            except Exception:
                await _settle(ctx, tasks)
                raise
            for call in calls:
                await ctx.store_tool_call(call)
            return
        for p, cid in zip(proposed, ids, strict=True):
            if ctx.aborted:
                # Every id the assistant message announced gets a record, or providers refuse
                # the conversation's next turn (a tool_use without its tool_result).
                await ctx.store_tool_call(
                    error_call(cid, p.name, "Error: the turn was aborted before this call ran.")
                )
                continue
            call = await ctx.run_tool(p.name, p.arguments, call_id=cid, inline_limit=limit)
            await ctx.store_tool_call(call)


async def _settle(ctx: DispatchContext, tasks: Sequence[asyncio.Future[ToolCall]]) -> None:
    """After one parallel call raised: cancel the others and store those that completed.

    A call raising `TurnAbortedError` (or an unexpected error) must not leave its siblings
    running after the turn ends, nor lose the calls that already finished.
    """
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled() and task.exception() is None:
            await ctx.store_tool_call(task.result())


def _streamer(ctx: DispatchContext) -> Callable[[str], None]:
    """Emit each streamed piece of answer text as a `ModelTextDelta`."""
    turn_id, dispatch_id, iteration, emit = ctx.turn_id, ctx.dispatch_id, ctx.iteration, ctx.emit

    def on_text_delta(text: str) -> None:
        if text:
            emit(
                ModelTextDelta(
                    turn_id=turn_id, dispatch_id=dispatch_id, iteration=iteration, text=text
                )
            )

    return on_text_delta


def unique_call_ids(ctx: DispatchContext, proposed: Sequence[ProposedToolCall]) -> list[str]:
    """Keep provider ids, but never reuse an id stored in this turn or its conversation.

    Missing ids are minted; a repeated one gets a ``-2``, ``-3``... suffix (the store keys a
    conversation's calls by id, so a reused id would replace an earlier call).
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
