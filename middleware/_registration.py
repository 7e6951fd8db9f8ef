"""Stage registration: one decorator core behind `Middleware` sets and class-based middleware.

`StageDecorator` is a stage's decorator, bare (``@stage``) or with keyword options
(``@stage(order=1)``). One instance per stage lives here (`turn_input`, `dispatch_input`,
`dispatch_output`, `turn_output`, the module-level decorators) and serves both families:

* used directly on a method of a class-based middleware, it attaches a `Registration` to the
  method as ``__loopware_registrations__``; the runner finds it on the instance's class and
  binds it (`Registration.bind`, the ``pipeline.stages.MethodRegistration`` protocol);
* read from a ``Middleware`` set, whose stage methods are these same objects, it returns itself
  bound to that set, and registers functions into the set (`Registration.to_spec`).

Either way the options are validated before the function is seen, its shape is checked at
decoration time, and the function is returned unchanged (adaptation happens once, when a runner
asks for specs). mypy sees each stage through two Protocols of ``_protocols`` (its face on
methods and on sets), which reject a wrongly shaped middleware at the decorator line.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stages import MiddlewareSpec, Stage

from ._adapt import Shape, adapt, inspect_shape
from ._options import check_bool, check_int, check_names
from ._protocols import (
    DispatchDecorator,
    DispatchMethodDecorator,
    ToolCallDecorator,
    ToolCallMethodDecorator,
    TurnDecorator,
    TurnMethodDecorator,
)

if TYPE_CHECKING:
    from ._set import Middleware

__all__ = [
    "REGISTRATIONS_ATTR",
    "Registration",
    "StageDecorator",
    "dispatch_input",
    "dispatch_output",
    "function_name",
    "tool_call",
    "turn_input",
    "turn_output",
]

REGISTRATIONS_ATTR = "__loopware_registrations__"

OnMethods = TypeVar("OnMethods")
"""A stage's typed face on methods (module-level use), e.g. `TurnMethodDecorator`."""

OnSets = TypeVar("OnSets")
"""A stage's typed face on a ``Middleware`` set, e.g. `TurnDecorator`."""


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
    """Names or globs: run only for calls (``tool_call``) or iterations (``dispatch_output``)
    involving a matching tool."""
    timed: bool = False
    """Emit a ``middleware.timing`` log per run."""
    method: bool = False
    """True for a method of class-based middleware (bound with `bind`)."""

    def bind(self, instance: object) -> MiddlewareSpec:
        """Return the spec of this method bound to ``instance`` (a `MethodRegistration` method).

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
            stage=self.stage,
            method=True,
            tools=self.tools,
            timing=(name, self.stage) if self.timed else None,
        )
        bound = unbound.__get__(instance, type(instance))
        check = fn.__get__(instance, type(instance)) if self._inline(shape) else None
        return MiddlewareSpec(
            stage=self.stage, name=name, fn=bound, order=self.order, check=check
        )

    def _inline(self, shape: Shape) -> bool:
        """Whether the function is a plain hook, which stages run in line (`Onion.checks`)."""
        return shape.hook and self.tools is None and not self.timed

    def to_spec(self, default_name: str) -> MiddlewareSpec:
        """Return the spec of this function, named ``default_name`` unless ``name=`` was given."""
        name = self.name or default_name
        fn = adapt(
            self.fn,
            self.shape,
            stage=self.stage,
            method=False,
            tools=self.tools,
            timing=(name, self.stage) if self.timed else None,
        )
        check = self.fn if self._inline(self.shape) else None
        return MiddlewareSpec(stage=self.stage, name=name, fn=fn, order=self.order, check=check)


def function_name(fn: object) -> str:
    """The ``__name__`` of a function, or the class name of a callable object."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name else type(fn).__name__


_Options = tuple[int, str | None, frozenset[str] | None, bool]


class StageDecorator(Generic[OnMethods, OnSets]):
    """A stage's decorator, bare (``@stage``) or with keyword options (``@stage(order=1)``).

    On a method of a class-based middleware it attaches a registration, which the runner binds
    to each instance it is handed; read from a ``Middleware`` set (``policy.dispatch_output``)
    it registers functions into that set. Either way it returns the function unchanged.

    Options (keyword-only, validated before the function is seen; see ``StageOptions``):
        order: Lower runs outer.
        name: The name in ``describe_pipelines()``; by default ``<set name>.<function name>``
            on a set and ``<ClassName>.<method name>`` on a class.
        tools: Only on a stage that filters by tool, as names or globs (``"shell*"``): on
            ``dispatch_output``, run only for iterations whose ``ctx.new_tool_calls`` include
            a matching tool; on ``tool_call``, run only around calls to a matching tool.
        timed: Emit a ``middleware.timing`` debug log per run; by default the set's ``timed``,
            and off for methods.

    Raises:
        InvalidMiddlewareConfigError: bad options, a wrongly shaped function, or the function
            (or, in a set, its name) is already registered on this stage.
    """

    __slots__ = ("_set", "filters_tools", "stage")

    def __init__(
        self, stage: Stage, *, filters_tools: bool = False, on: Middleware | None = None
    ) -> None:
        """Make the decorator of ``stage`` (``on`` a set, or for methods when None).

        ``filters_tools`` allows the ``tools=`` option: only stages that see completed calls.
        """
        self.stage: Stage = stage
        self.filters_tools = filters_tools
        self._set = on

    def __repr__(self) -> str:
        """``middleware.<stage>``, or ``Middleware('<name>').<stage>`` when read from a set."""
        owner = "middleware" if self._set is None else f"Middleware({self._set.name!r})"
        return f"{owner}.{self.stage}"

    @overload
    def __get__(self, instance: None, owner: type[Any], /) -> Self: ...
    @overload
    def __get__(self, instance: Middleware, owner: type[Any], /) -> OnSets: ...
    def __get__(self, instance: Middleware | None, owner: type[Any], /) -> Any:
        """Read from a ``Middleware`` set: this stage's decorator for that set."""
        if instance is None:
            return self
        return StageDecorator(self.stage, filters_tools=self.filters_tools, on=instance)

    def _decorate(
        self,
        fn: object = None,
        /,
        *,
        order: object = 0,
        name: object = None,
        tools: object = None,
        timed: object = None,
    ) -> Any:
        """Register ``fn`` and return it, or, without ``fn``, return a decorator that does."""
        options = self._check_options(order, name, tools, timed)
        if fn is not None:
            self._register(fn, options)
            return fn

        def register(func: object) -> object:
            self._register(func, options)
            return func

        return register

    if TYPE_CHECKING:
        # mypy sees the stage's typed face (Protocols in ``_protocols``): overloads that reject
        # a wrongly shaped middleware at the decorator line; it checks `_decorate` as written
        __call__: OnMethods
    else:
        __call__ = _decorate

    def _check_options(self, order: object, name: object, tools: object, timed: object) -> _Options:
        owner, stage = repr(self), self.stage
        checked_order = check_int(owner, "order", order, minimum=None)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InvalidMiddlewareConfigError(
                f"{owner}: name must be a non-empty string, got {name!r}", option="name"
            )
        if timed is None:
            timed = False if self._set is None else self._set.timed
        checked_timed = check_bool(owner, "timed", timed)
        if tools is None:
            return checked_order, name, None, checked_timed
        if not self.filters_tools:
            # dispatch input runs before the executor, when the iteration has no calls yet: a
            # filter there could never fire, so it is refused rather than silently inert
            raise InvalidMiddlewareConfigError(
                f"tools= runs a middleware only for calls to those tools, which only "
                f"dispatch_output and tool_call can see; it is not valid on {stage!r}",
                option="tools",
                stage=stage,
            )
        names = frozenset(check_names(owner, "tools", tools, noun="tool names or globs"))
        if not names:
            raise InvalidMiddlewareConfigError(
                f"{owner}: tools must name at least one tool", option="tools"
            )
        return checked_order, name, names, checked_timed

    def _register(self, fn: object, options: _Options) -> None:
        on_set = self._set
        order, name, tools, timed = options
        registration = Registration(
            stage=self.stage,
            fn=fn,  # type: ignore[arg-type]  # inspect_shape (next line) refuses non-callables
            shape=inspect_shape(fn, method=on_set is None),
            order=order,
            name=name,
            tools=tools,
            timed=timed,
            method=on_set is None,
        )
        if on_set is None:
            _attach(registration)
        else:
            on_set.add(registration)


def _attach(registration: Registration) -> None:
    """Attach a method's registration to it, refusing what cannot be bound or is a repeat."""
    fn, stage = registration.fn, registration.stage
    label = function_name(fn)
    if not hasattr(type(fn), "__get__"):
        raise InvalidMiddlewareConfigError(
            f"{label!r} cannot be bound to an instance; the module-level decorators are for "
            "methods (use a Middleware set for other callables)",
            middleware=label,
        )
    existing: tuple[Registration, ...] = getattr(fn, REGISTRATIONS_ATTR, ())
    if any(reg.stage == stage for reg in existing):
        raise InvalidMiddlewareConfigError(
            f"{label!r} is already registered on {stage!r}", middleware=label, stage=stage
        )
    try:
        setattr(fn, REGISTRATIONS_ATTR, (*existing, registration))
    except (AttributeError, TypeError) as exc:
        raise InvalidMiddlewareConfigError(
            f"cannot register {label!r}: it does not accept attributes; decorate a plain method",
            middleware=label,
        ) from exc


# -- the stages: one line each; the type arguments are the stage's typed faces -----------------

_ToolNames = Collection[str] | None
"""The type of ``tools=`` on a stage that filters by tool."""

turn_input: StageDecorator[TurnMethodDecorator, TurnDecorator] = StageDecorator("turn_input")
dispatch_input: StageDecorator[DispatchMethodDecorator[None], DispatchDecorator[None]] = (
    StageDecorator("dispatch_input")
)
dispatch_output: StageDecorator[
    DispatchMethodDecorator[_ToolNames], DispatchDecorator[_ToolNames]
] = StageDecorator("dispatch_output", filters_tools=True)
tool_call: StageDecorator[ToolCallMethodDecorator, ToolCallDecorator] = StageDecorator(
    "tool_call", filters_tools=True
)
turn_output: StageDecorator[TurnMethodDecorator, TurnDecorator] = StageDecorator("turn_output")
