"""Stage registrations: validated options, and the module-level decorators for methods.

A `Registration` records one function on one stage with its options. It turns into a
``pipeline.MiddlewareSpec`` (adapting the function once) either from a ``Middleware`` set
(`Registration.to_spec`) or, for class-based middleware, by binding to an instance
(`Registration.bind`, the ``pipeline.MethodRegistration`` protocol). The module-level decorators
(`turn_input`, `dispatch_input`, `dispatch_output`, `turn_output`) attach registrations to methods
as ``__loopware_registrations__`` and return the method unchanged; the runner finds them on the
instance's class.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, overload

from pipeline import InvalidMiddlewareConfigError, MiddlewareSpec, Stage

from ._adapt import Shape, adapt, inspect_shape
from ._protocols import DispatchMethodT, TurnMethodT

__all__ = [
    "REGISTRATIONS_ATTR",
    "Registration",
    "check_options",
    "dispatch_input",
    "dispatch_output",
    "function_name",
    "turn_input",
    "turn_output",
]

REGISTRATIONS_ATTR = "__loopware_registrations__"


@dataclass(frozen=True, slots=True)
class Registration:
    """One function registered on one stage, with validated options."""

    stage: Stage
    """The stage it runs in."""
    fn: Callable[..., Any]
    """The function as registered (never modified)."""
    shape: Shape
    """How it must be called (hook or middleware, sync or async)."""
    order: int = 0
    """Lower runs outer."""
    name: str | None = None
    """The ``name=`` option; None means the default name."""
    tools: frozenset[str] | None = None
    """Run only for iterations that completed a call to one of these tools."""
    timed: bool = False
    """Emit a ``middleware.timing`` log per run."""
    method: bool = False
    """True for a method of class-based middleware (bound with `bind`)."""

    def bind(self, instance: object) -> MiddlewareSpec:
        """Return the spec of this method bound to ``instance`` (``pipeline.MethodRegistration``).

        The name defaults to ``<ClassName>.<method name>``. When the instance's class overrides
        the method without decorating it again, the override runs in its place (with these
        options): the most-derived definition wins, as for any method call.
        """
        fn, shape = self.fn, self.shape
        method_name = function_name(fn)
        override = inspect.getattr_static(type(instance), method_name, None)
        if (
            override is not fn
            and inspect.isfunction(override)
            and not getattr(override, REGISTRATIONS_ATTR, None)
        ):
            fn, shape = override, inspect_shape(override, method=True)
        name = self.name or f"{type(instance).__name__}.{method_name}"
        unbound = adapt(
            fn,
            shape,
            method=True,
            tools=self.tools,
            timing=(name, self.stage) if self.timed else None,
        )
        bound = unbound.__get__(instance, type(instance))
        return MiddlewareSpec(stage=self.stage, name=name, fn=bound, order=self.order)

    def to_spec(self, default_name: str) -> MiddlewareSpec:
        """Return the spec of this function, named ``default_name`` unless ``name=`` was given."""
        name = self.name or default_name
        fn = adapt(
            self.fn,
            self.shape,
            method=False,
            tools=self.tools,
            timing=(name, self.stage) if self.timed else None,
        )
        return MiddlewareSpec(stage=self.stage, name=name, fn=fn, order=self.order)


def function_name(fn: object) -> str:
    """The ``__name__`` of a function, or the class name of a callable object."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name else type(fn).__name__


def check_options(
    stage: Stage, order: object, name: object, tools: object, timed: object
) -> tuple[int, str | None, frozenset[str] | None, bool]:
    """Validate decorator options and return them normalised.

    Raises:
        InvalidMiddlewareConfigError: ``order`` is not an int, ``name`` is empty or not a string,
            ``tools`` is empty, a bare string, holds a non-string or empty name, or is given on
            a stage other than ``dispatch_output``, or ``timed`` is not a bool.
    """
    if isinstance(order, bool) or not isinstance(order, int):
        raise InvalidMiddlewareConfigError(
            f"order must be an int, got {order!r}", option="order", stage=stage
        )
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidMiddlewareConfigError(
            f"name must be a non-empty string, got {name!r}", option="name", stage=stage
        )
    if not isinstance(timed, bool):
        raise InvalidMiddlewareConfigError(
            f"timed must be a bool, got {timed!r}", option="timed", stage=stage
        )
    tool_set: frozenset[str] | None = None
    if tools is not None:
        if stage != "dispatch_output":
            # dispatch input runs before the executor, when the iteration has no calls yet: a
            # filter there could never fire, so it is refused rather than silently inert
            raise InvalidMiddlewareConfigError(
                f"tools= runs a middleware only for iterations that completed calls to those "
                f"tools, which only dispatch_output can see; it is not valid on {stage!r}",
                option="tools",
                stage=stage,
            )
        if isinstance(tools, str | bytes) or not isinstance(tools, Collection):
            raise InvalidMiddlewareConfigError(
                f"tools must be a collection of tool names (e.g. a list), got {tools!r}",
                option="tools",
                stage=stage,
            )
        if not tools:
            raise InvalidMiddlewareConfigError(
                "tools must name at least one tool", option="tools", stage=stage
            )
        for tool in tools:
            if not isinstance(tool, str) or not tool:
                raise InvalidMiddlewareConfigError(
                    f"tools must hold non-empty tool names, got {tool!r}",
                    option="tools",
                    stage=stage,
                )
        tool_set = frozenset(tools)
    return order, name, tool_set, timed


# -- module-level decorators for methods of class-based middleware --------------------------


def _attach(
    stage: Stage,
    fn: object,
    order: int,
    name: str | None,
    tools: frozenset[str] | None,
    timed: bool,
) -> None:
    shape = inspect_shape(fn, method=True)
    if not hasattr(type(fn), "__get__"):
        raise InvalidMiddlewareConfigError(
            f"{function_name(fn)!r} cannot be bound to an instance; the module-level decorators "
            "are for methods (use a Middleware set for other callables)",
            middleware=function_name(fn),
        )
    existing: tuple[Registration, ...] = getattr(fn, REGISTRATIONS_ATTR, ())
    for reg in existing:
        if reg.stage == stage:
            raise InvalidMiddlewareConfigError(
                f"{function_name(fn)!r} is already registered on {stage!r}",
                middleware=function_name(fn),
                stage=stage,
            )
    reg = Registration(
        stage=stage,
        fn=fn,  # type: ignore[arg-type]  # inspect_shape proved it callable
        shape=shape,
        order=order,
        name=name,
        tools=tools,
        timed=timed,
        method=True,
    )
    try:
        setattr(fn, REGISTRATIONS_ATTR, (*existing, reg))
    except (AttributeError, TypeError) as exc:
        raise InvalidMiddlewareConfigError(
            f"cannot register {function_name(fn)!r}: it does not accept attributes; "
            "decorate a plain method",
            middleware=function_name(fn),
        ) from exc


def _method_decorator(
    stage: Stage,
    fn: object,
    order: object,
    name: object,
    tools: object,
    timed: object,
) -> Any:
    options = check_options(stage, order, name, tools, timed)
    if fn is not None:
        _attach(stage, fn, *options)
        return fn

    def register(method: object) -> object:
        _attach(stage, method, *options)
        return method

    return register


@overload
def turn_input(fn: TurnMethodT, /) -> TurnMethodT: ...
@overload
def turn_input(
    fn: None = None, /, *, order: int = 0, name: str | None = None, timed: bool = False
) -> Callable[[TurnMethodT], TurnMethodT]: ...
def turn_input(
    fn: object = None,
    /,
    *,
    order: int = 0,
    name: str | None = None,
    tools: Collection[str] | None = None,
    timed: bool = False,
) -> Any:
    """Register a method of a class-based middleware on the turn input stage.

    Use bare (``@turn_input``) or with options (``@turn_input(order=-10)``). The method is
    returned unchanged; an instance of its class passed in ``TurnRunner(middleware=[...])``
    contributes the bound method.

    Args:
        fn: The method (bare form).
        order: Lower runs outer.
        name: The name in ``describe_pipelines()``; default ``<ClassName>.<method name>``.
        tools: Not valid on a turn stage (raises); see `dispatch_output`.
        timed: Emit a ``middleware.timing`` debug log per run.

    Raises:
        InvalidMiddlewareConfigError: bad options, a wrongly shaped method, or the method is
            already registered on this stage.
    """
    return _method_decorator("turn_input", fn, order, name, tools, timed)


@overload
def dispatch_input(fn: DispatchMethodT, /) -> DispatchMethodT: ...
@overload
def dispatch_input(
    fn: None = None, /, *, order: int = 0, name: str | None = None, timed: bool = False
) -> Callable[[DispatchMethodT], DispatchMethodT]: ...
def dispatch_input(
    fn: object = None,
    /,
    *,
    order: int = 0,
    name: str | None = None,
    tools: Collection[str] | None = None,
    timed: bool = False,
) -> Any:
    """Register a method of a class-based middleware on the dispatch input stage.

    Args:
        fn: The method (bare form).
        order: Lower runs outer.
        name: The name in ``describe_pipelines()``; default ``<ClassName>.<method name>``.
        tools: Not valid here (raises): the iteration has made no calls yet.
        timed: Emit a ``middleware.timing`` debug log per run.

    Raises:
        InvalidMiddlewareConfigError: bad options, a wrongly shaped method, or the method is
            already registered on this stage.
    """
    return _method_decorator("dispatch_input", fn, order, name, tools, timed)


@overload
def dispatch_output(fn: DispatchMethodT, /) -> DispatchMethodT: ...
@overload
def dispatch_output(
    fn: None = None,
    /,
    *,
    order: int = 0,
    name: str | None = None,
    tools: Collection[str] | None = None,
    timed: bool = False,
) -> Callable[[DispatchMethodT], DispatchMethodT]: ...
def dispatch_output(
    fn: object = None,
    /,
    *,
    order: int = 0,
    name: str | None = None,
    tools: Collection[str] | None = None,
    timed: bool = False,
) -> Any:
    """Register a method of a class-based middleware on the dispatch output stage.

    Args:
        fn: The method (bare form).
        order: Lower runs outer.
        name: The name in ``describe_pipelines()``; default ``<ClassName>.<method name>``.
        tools: Run only for iterations whose ``ctx.new_tool_calls`` include one of these tools.
        timed: Emit a ``middleware.timing`` debug log per run.

    Raises:
        InvalidMiddlewareConfigError: bad options, a wrongly shaped method, or the method is
            already registered on this stage.
    """
    return _method_decorator("dispatch_output", fn, order, name, tools, timed)


@overload
def turn_output(fn: TurnMethodT, /) -> TurnMethodT: ...
@overload
def turn_output(
    fn: None = None, /, *, order: int = 0, name: str | None = None, timed: bool = False
) -> Callable[[TurnMethodT], TurnMethodT]: ...
def turn_output(
    fn: object = None,
    /,
    *,
    order: int = 0,
    name: str | None = None,
    tools: Collection[str] | None = None,
    timed: bool = False,
) -> Any:
    """Register a method of a class-based middleware on the turn output stage.

    Args:
        fn: The method (bare form).
        order: Lower runs outer.
        name: The name in ``describe_pipelines()``; default ``<ClassName>.<method name>``.
        tools: Not valid on a turn stage (raises); see `dispatch_output`.
        timed: Emit a ``middleware.timing`` debug log per run.

    Raises:
        InvalidMiddlewareConfigError: bad options, a wrongly shaped method, or the method is
            already registered on this stage.
    """
    return _method_decorator("turn_output", fn, order, name, tools, timed)


for _fn in (turn_input, dispatch_input, dispatch_output, turn_output):
    _fn.__module__ = "middleware"
