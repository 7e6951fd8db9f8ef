"""Running one tool call: guards, events and error wrapping around the private handler."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

from ._errors import LoopError, ToolDownstreamError
from ._events import Event, ToolExecutionEnd, ToolExecutionStart

if TYPE_CHECKING:
    from ._dispatch import DispatchContext
    from ._tool import Tool, ToolOutput

__all__ = ["run_tool"]


async def run_tool(
    tool: Tool[Any],
    ctx: Any,
    args: Mapping[str, Any],
    call_id: str,
    emit: Callable[[Event], None] | None,
) -> ToolOutput:
    """Validate ``args``, pass the guards, run the handler and emit the two events.

    ``call_id`` is the checksum of the raw arguments, computed by the caller. ``emit`` is None
    when nobody listens, which skips building the events (the hot path of a quiet runner).

    Raises:
        InvalidToolArgsError: the arguments fail the schema (no event, handler not called).
        ToolDownstreamError: the handler (or a guard) raised a non-loopware exception.
        LoopError: raised by the handler or a guard, unchanged.
    """
    name = tool._name
    validated = tool._schema.validate(args)
    handler_ctx = cast("DispatchContext", ctx)
    for guard in tool._guards:
        try:
            await guard(args, handler_ctx)
        except LoopError:
            raise
        except Exception as exc:
            raise ToolDownstreamError(
                f"tool {name!r} guard failed: {type(exc).__name__}: {exc}",
                tool_name=name,
                call_id=call_id,
            ) from exc
    started_at = datetime.now(UTC) if emit is not None else None
    if emit is not None:
        emit(
            ToolExecutionStart(
                turn_id=ctx.turn_id,
                timestamp=cast(datetime, started_at),
                tool_name=name,
                call_id=call_id,
                args=validated,
                started_at=cast(datetime, started_at),
            )
        )
    start = perf_counter()
    try:
        result = tool._handler(validated, handler_ctx, tool._meta)
        if tool._is_async or (type(result) is not str and inspect.isawaitable(result)):
            result = await cast("Awaitable[ToolOutput]", result)
    except BaseException as exc:
        if emit is not None:
            emit(_end(ctx, name, call_id, validated, started_at, start, is_error=True))
        if isinstance(exc, LoopError) or not isinstance(exc, Exception):
            raise
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ToolDownstreamError(
            f"tool {name!r} failed: {detail}", tool_name=name, call_id=call_id
        ) from exc
    if emit is not None:
        emit(_end(ctx, name, call_id, validated, started_at, start, is_error=False))
    return result


def _end(
    ctx: Any,
    name: str,
    call_id: str,
    validated: object,
    started_at: datetime | None,
    start: float,
    *,
    is_error: bool,
) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        turn_id=ctx.turn_id,
        tool_name=name,
        call_id=call_id,
        args=validated,
        started_at=cast(datetime, started_at),
        duration_ms=(perf_counter() - start) * 1000.0,
        is_error=is_error,
    )
