"""`ToolLoopExecutor`: the standard executor (model call, tool calls, storage, ack)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._errors import LoopError, ToolNotFoundError, TurnAbortedError
from ._json import tool_call_checksum
from ._tool_run import run_tool
from ._toolcall import ToolCall
from .artifacts._artifact import SpooledArtifact
from .artifacts._forge import ArtifactTool
from .artifacts._media import Media
from .models._seam import ChatModel, Message, ModelRequest, ProposedToolCall

if TYPE_CHECKING:
    from ._context import DispatchContext
    from ._tool import Tool

__all__ = ["ToolLoopExecutor"]

Results = str | SpooledArtifact | Media | tuple[Media, ...]


class ToolLoopExecutor:
    """The standard executor: ask the model, run the calls it proposes, store them, ack.

    Per iteration it renders the visible tools, calls the model once, and for every proposed
    call parses the JSON arguments, runs ``tool.executor(ctx)`` and stores a `ToolCall`. Bad
    arguments, unknown tools and failing handlers become error calls the model reads on the
    next iteration; they never end the turn. No proposed calls means the model answered: the
    text is stored as the assistant message and the dispatch is acked.

    Args:
        model: Any `ChatModel`.
        parallel_tool_calls: Run the calls proposed together concurrently (stored in proposal
            order either way).
        inline_limit: Text results up to this many UTF-8 bytes are shown to the model whole
            (``inline=True``); longer ones are shown as an artifact handle the model queries
            with artifact tools.
    """

    __slots__ = ("inline_limit", "model", "parallel_tool_calls")

    def __init__(
        self, model: ChatModel, *, parallel_tool_calls: bool = False, inline_limit: int = 4096
    ) -> None:
        """Configure the executor."""
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
        turn = ctx.turn
        visible = ctx.tools.visible()
        request = ModelRequest(
            system_prompt=ctx.system_prompt,
            messages=tuple(turn._messages),
            tool_calls=(*turn._history_calls, *turn._calls)
            if turn._history_calls
            else tuple(turn._calls),
            tools=tuple(t._shared_description() for t in visible),
        )
        response = await self.model.complete(request)
        proposed = list(response.tool_calls)
        if not proposed:
            await ctx.store_message(Message(role="assistant", content=response.text or ""))
            ctx.ack()
            return
        ids = _unique_ids(ctx, proposed)
        await ctx.store_message(
            Message(role="assistant", content=response.text or "", tool_call_ids=tuple(ids))
        )
        if self.parallel_tool_calls and len(proposed) > 1:
            tasks = [
                asyncio.ensure_future(self._run(ctx, p, cid))
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
            if turn._aborted:
                # Every id the assistant message announced gets a record, or providers refuse
                # the conversation's next turn (a tool_use without its tool_result).
                await ctx.store_tool_call(
                    _error(cid, p.name, "Error: the turn was aborted before this call ran.")
                )
                continue
            await ctx.store_tool_call(await self._run(ctx, p, cid))

    async def _run(
        self, ctx: DispatchContext, proposed: ProposedToolCall, call_id: str
    ) -> ToolCall:
        name = proposed.name
        text: object = proposed.arguments
        if not isinstance(text, str):  # a model seam that already parsed them
            text = json.dumps(text) if isinstance(text, dict) else str(text)
        try:
            args = json.loads(text) if text.strip() else {}
        except RecursionError:
            return _error(
                call_id,
                name,
                f"Error: the arguments for {name!r} are nested too deeply; send a flatter JSON "
                "object.",
            )
        except ValueError as exc:
            where = (
                f" at line {exc.lineno} column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else ""
            )
            return _error(
                call_id,
                name,
                f"Error: the arguments for {name!r} are not valid JSON ({_reason(exc)}{where}); "
                "send a JSON object.",
            )
        if not isinstance(args, dict):
            return _error(
                call_id,
                name,
                f"Error: the arguments for {name!r} must be a JSON object, got {_json_kind(args)}.",
            )
        try:
            checksum = tool_call_checksum(name or _UNNAMED, args)
        except (TypeError, RecursionError):
            return _error(
                call_id, name, f"Error: the arguments for {name!r} are nested too deeply."
            )
        tool = ctx.tools.get(name) if name else None
        if tool is None:
            available = ", ".join(t.name for t in ctx.tools.visible()) or "(none)"
            err = ToolNotFoundError(
                f"unknown tool {name!r}; available tools: {available}", tool_name=name
            )
            return ToolCall._record(
                call_id, name or _UNNAMED, args, checksum, f"Error: {err}", is_error=True
            )
        turn = ctx.turn
        emit = turn.emit if turn._bus.listening else None
        try:
            output = await run_tool(tool, ctx, args, checksum, emit)
        except TurnAbortedError:
            raise
        except LoopError as exc:
            return ToolCall._record(call_id, name, args, checksum, f"Error: {exc}", is_error=True)
        return self._completed(ctx, tool, call_id, args, checksum, output)

    def _completed(
        self,
        ctx: DispatchContext,
        tool: Tool[Any],
        call_id: str,
        args: dict[str, Any],
        checksum: str,
        output: object,
    ) -> ToolCall:
        if isinstance(tool, ArtifactTool):
            body = output if isinstance(output, str) else str(output)
            return ToolCall._record(
                call_id, tool.name, args, checksum, body, from_artifact_tool=True
            )
        results: Results
        inline = False
        if isinstance(output, (str, bytes)):
            key = f"{ctx.turn_id}/{call_id}"
            reader = ctx.spool.write(key, output)
            ctx.turn._spool_keys.append(key)
            results = tool.artifact_class(reader)
            inline = _fits(output, self.inline_limit)
        elif isinstance(output, (SpooledArtifact, Media)):
            results = output
        elif isinstance(output, Sequence) and output and all(isinstance(m, Media) for m in output):
            results = tuple(output)
        else:
            return ToolCall._record(
                call_id,
                tool.name,
                args,
                checksum,
                f"Error: tool {tool.name!r} returned {type(output).__name__}, which is not a "
                "tool output (str, bytes, SpooledArtifact, Media or a list of Media).",
                is_error=True,
            )
        return ToolCall._record(call_id, tool.name, args, checksum, results, inline=inline)


def _fits(output: str | bytes, limit: int) -> bool:
    """True when ``output`` is at most ``limit`` UTF-8 bytes (encoding only when it matters)."""
    n = len(output)
    if isinstance(output, bytes) or n > limit:
        return n <= limit
    if n * 4 <= limit:  # a character is at most four UTF-8 bytes
        return True
    return len(output.encode("utf-8", "surrogatepass")) <= limit


_UNNAMED = "(unnamed)"
"""The tool name stored for a proposed call that named no tool."""


def _error(call_id: str, name: str, text: str) -> ToolCall:
    """An error call for arguments unusable as given: they are stored as ``{}``."""
    return ToolCall.completed(
        id=call_id, tool=name or _UNNAMED, args={}, results=text, is_error=True
    )


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


def _reason(exc: ValueError) -> str:
    return exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _unique_ids(ctx: DispatchContext, proposed: Sequence[ProposedToolCall]) -> list[str]:
    """Keep provider ids, but never reuse an id stored in this turn or its conversation."""
    turn = ctx.turn
    ids: list[str] = []
    # history ids too: the store keys a conversation's calls by id, so a reused id would
    # replace (lose) an earlier turn's call
    history = turn._history_ids
    seen: set[str] = set()
    for p in proposed:
        cid = p.id or ToolCall.new_id()
        if cid in seen or cid in history or cid in turn._by_id:
            n = 2
            while (c := f"{cid}-{n}") in seen or c in history or c in turn._by_id:
                n += 1
            cid = c
        seen.add(cid)
        ids.append(cid)
    return ids


ToolLoopExecutor.__module__ = "pipeline"
