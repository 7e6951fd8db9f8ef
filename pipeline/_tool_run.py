"""Running one tool call: guards, events and error wrapping around the private handler.

`Tool.run` hands its own parts to `run_handler`, so this module never reads a tool's private
fields; the provider's call id travels through here into the events and errors.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

from ._errors import LoopError, ToolDownstreamError
from ._events import ToolExecutionEnd, ToolExecutionStart

if TYPE_CHECKING:
    from ._stash import Stash
    from ._tool import ToolContext, ToolGuard, ToolHandler, ToolOutput
    from ._tool_schema import ArgsSchema

__all__ = ["run_handler"]


async def run_handler(
    name: str,
    schema: ArgsSchema[Any],
    guards: tuple[ToolGuard, ...],
    handler: ToolHandler[Any],
    meta: Stash,
    is_async: bool,
    ctx: ToolContext,
    args: Mapping[str, Any],
    call_id: str,
    checksum: str,
    listening: bool,
    validated: Any = None,
) -> ToolOutput:
    """Validate ``args``, pass the guards, run the handler and emit the two events.

    ``listening`` False skips building the events (the hot path of a quiet runner);
    ``validated`` given skips validating ``args`` again.

    Raises:
        InvalidToolArgsError: the arguments fail the schema (no event, handler not called).
        ToolDownstreamError: the handler (or a guard) raised a non-loopware exception.
        LoopError: raised by the handler or a guard, unchanged.
    """
    if validated is None:
        validated = schema.validate(args)
    handler_ctx: Any = ctx  # the runner passes its DispatchContext; tests any ToolContext
    for guard in guards:
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
    started_at = datetime.now(UTC) if listening else None
    if started_at is not None and _wants_start(ctx):
        ctx.emit(
            ToolExecutionStart(
                turn_id=ctx.turn_id,
                timestamp=started_at,
                tool_name=name,
                call_id=call_id,
                checksum=checksum,
                args=validated,
                started_at=started_at,
            )
        )
    start = perf_counter() if started_at is not None else 0.0
    try:
        result = handler(validated, handler_ctx, meta)
        if is_async or (type(result) is not str and inspect.isawaitable(result)):
            result = await cast("Awaitable[ToolOutput]", result)
    except BaseException as exc:
        if started_at is not None:
            ctx.emit(_end(ctx, name, call_id, checksum, validated, started_at, start, True))
        if isinstance(exc, LoopError) or not isinstance(exc, Exception):
            raise
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ToolDownstreamError(
            f"tool {name!r} failed: {detail}", tool_name=name, call_id=call_id
        ) from exc
    if started_at is not None:
        ctx.emit(_end(ctx, name, call_id, checksum, validated, started_at, start, False))
    return result


def _wants_start(ctx: ToolContext) -> bool:
    """Whether a listener takes `ToolExecutionStart` (a context that cannot tell: yes)."""
    listens_for = getattr(ctx, "listens_for", None)
    return True if listens_for is None else bool(listens_for(ToolExecutionStart))


def _end(
    ctx: ToolContext,
    name: str,
    call_id: str,
    checksum: str,
    validated: object,
    started_at: datetime,
    start: float,
    is_error: bool,
) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        turn_id=ctx.turn_id,
        tool_name=name,
        call_id=call_id,
        checksum=checksum,
        args=validated,
        started_at=started_at,
        duration_ms=(perf_counter() - start) * 1000.0,
        is_error=is_error,
    )
