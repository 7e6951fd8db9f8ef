"""Adapting registered functions to the one middleware contract, ``async (ctx, call_next)``.

Registration records a function unchanged; when a runner asks for specs, each function is adapted
once (never per call):

* a one-argument hook (sync or async) runs, then the adapter awaits ``call_next``;
* a sync two-argument function is called and whatever awaitable it returns is awaited;
* ``tools=`` (names or globs) runs the middleware only around calls to a matching tool
  (``tool_call``) or for iterations that completed one (``dispatch_output``);
* ``timed=True`` emits a ``middleware.timing`` debug `Log` with the middleware's own time.

An async two-argument function with no options is passed through untouched: the hot path pays
nothing. The adapters are wrapt function wrappers, so signatures (the adapted ``(ctx,
call_next)`` shape), docstrings, names and ``inspect.iscoroutinefunction`` stay truthful, and
methods of class-based middleware are wrapped unbound and then bound through the descriptor
protocol like any decorated method. wrapt (which imports ``importlib.metadata``) loads when the
first function is adapted, not on ``import middleware`` (docs/architecture.md, "Import time").
"""

from __future__ import annotations

import fnmatch
import inspect
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import cache
from time import perf_counter
from typing import Any

from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stages import CallNext, Stage

__all__ = ["Shape", "adapt", "inspect_shape"]

_Wrapper = Callable[
    [Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Coroutine[Any, Any, None]
]


@dataclass(frozen=True, slots=True)
class Shape:
    """How a registered function must be called, found once at registration."""

    hook: bool
    """True for a one-argument hook ``(ctx)``; False for ``(ctx, call_next)``."""
    is_async: bool
    """True when calling it returns a coroutine (``async def`` or an async ``__call__``)."""


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def inspect_shape(fn: object, *, method: bool) -> Shape:
    """Classify ``fn`` as a hook or a middleware, sync or async.

    Args:
        fn: The registered callable.
        method: True when ``fn`` is a method (its first parameter is the instance).

    Raises:
        InvalidMiddlewareConfigError: ``fn`` is not callable, is a generator, has no parameter
            for the context, or needs more than ``(ctx, call_next)`` (a required keyword-only
            parameter included).
    """
    label = _label(fn)
    if isinstance(fn, staticmethod | classmethod):
        raise InvalidMiddlewareConfigError(
            f"{label} is a {type(fn).__name__}; decorate a plain method or function",
            middleware=label,
        )
    if not callable(fn):
        raise InvalidMiddlewareConfigError(
            f"{label} is not callable; a middleware is a function", middleware=label
        )
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise InvalidMiddlewareConfigError(
            f"{label} is a generator function; a middleware returns None", middleware=label
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise InvalidMiddlewareConfigError(
            f"cannot read the signature of {label}: {exc}", middleware=label
        ) from exc
    positional = [p for p in params if p.kind in _POSITIONAL]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    for p in params:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty:
            raise InvalidMiddlewareConfigError(
                f"{label} has a required keyword-only parameter {p.name!r}; a middleware is "
                "called as (ctx, call_next) and a hook as (ctx)",
                middleware=label,
            )
    if method:
        if not positional and not varargs:
            raise InvalidMiddlewareConfigError(
                f"{label} takes no 'self'; the module-level decorators are for methods",
                middleware=label,
            )
        positional = positional[1:]
    required = sum(1 for p in positional if p.default is inspect.Parameter.empty)
    if required > 2:
        raise InvalidMiddlewareConfigError(
            f"{label} needs {required} arguments; a middleware takes (ctx, call_next) and a "
            "hook takes (ctx)",
            middleware=label,
        )
    if varargs or len(positional) >= 2:
        hook = False
    elif len(positional) == 1:
        hook = True
    else:
        raise InvalidMiddlewareConfigError(
            f"{label} takes no context argument; a middleware takes (ctx, call_next) and a "
            "hook takes (ctx)",
            middleware=label,
        )
    return Shape(hook=hook, is_async=_is_async(fn))


def _is_async(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return False
    # a callable object: Python 3.11's iscoroutinefunction does not look at __call__
    return inspect.iscoroutinefunction(type(fn).__call__)


def _label(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return repr(name) if isinstance(name, str) else repr(fn)


# -- the shape adapters (one wrapt decorator per shape, built once, on first use) -------------


async def _middleware_prototype(ctx: Any, call_next: CallNext, /) -> None:
    """Prototype of an adapted middleware (its reported signature)."""


async def _method_prototype(self: Any, ctx: Any, call_next: CallNext, /) -> None:
    """Prototype of an adapted middleware method (its reported signature)."""


async def _run_async_hook(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    await wrapped(args[0])
    await args[1]()


async def _run_sync_hook(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    result = wrapped(args[0])
    if result is not None and inspect.isawaitable(result):
        await result
    await args[1]()


async def _run_sync_middleware(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    result = wrapped(args[0], args[1])
    if result is not None and inspect.isawaitable(result):
        await result


_SHAPE_WRAPPERS: dict[tuple[bool, bool], _Wrapper] = {
    (True, True): _run_async_hook,
    (True, False): _run_sync_hook,
    (False, False): _run_sync_middleware,
}
"""(hook, is_async) -> what the adapter runs; the async two-argument shape needs none."""


@cache
def _shape_adapter(hook: bool, is_async: bool, method: bool) -> Any:
    """The wrapt decorator for one shape, built on first use and then shared."""
    import wrapt

    prototype = _method_prototype if method else _middleware_prototype
    return wrapt.decorator(adapter=prototype)(_SHAPE_WRAPPERS[(hook, is_async)])


def _tool_filter(tools: frozenset[str], stage: Stage) -> Any:
    import wrapt

    match = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in sorted(tools))).match

    async def only_for_tools(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        for call in args[0].new_tool_calls:
            if match(call.tool) is not None:
                await wrapped(args[0], args[1])
                return
        await args[1]()

    async def only_around_tools(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        if match(args[0].tool_name) is not None:
            await wrapped(args[0], args[1])
        else:
            await args[1]()

    return wrapt.decorator(only_around_tools if stage == "tool_call" else only_for_tools)


def _timing(name: str, stage: Stage) -> Any:
    import wrapt

    async def timed(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        ctx, call_next = args
        inner = 0.0

        async def timed_next() -> None:
            nonlocal inner
            entered = perf_counter()
            try:
                await call_next()
            finally:
                inner += perf_counter() - entered

        started = perf_counter()
        try:
            await wrapped(ctx, timed_next)
        finally:
            total_ms = (perf_counter() - started) * 1000.0
            self_ms = total_ms - inner * 1000.0
            ctx.log.debug(
                "middleware.timing",
                f"{name} ({stage}) took {self_ms:.3f} ms of its own",
                middleware=name,
                stage=stage,
                self_ms=self_ms,
                total_ms=total_ms,
            )

    return wrapt.decorator(timed)


def adapt(
    fn: Callable[..., Any],
    shape: Shape,
    *,
    stage: Stage,
    method: bool,
    tools: frozenset[str] | None,
    timing: tuple[str, Stage] | None,
) -> Callable[..., Any]:
    """Return ``fn`` adapted to ``async (ctx, call_next) -> None``.

    For a method (``method=True``) the result is still unbound: bind it with
    ``result.__get__(instance, type(instance))``. Without hooks, sync code or options the result
    is ``fn`` itself.
    """
    adapted: Callable[..., Any] = fn
    if shape.hook or not shape.is_async:
        adapted = _shape_adapter(shape.hook, shape.is_async, method)(adapted)
    if tools is not None:
        adapted = _tool_filter(tools, stage)(adapted)
    if timing is not None:
        adapted = _timing(*timing)(adapted)
    return adapted
