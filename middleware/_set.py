"""`Middleware`: a named, ordered, inspectable set of stage registrations."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stages import MiddlewareSpec, Stage

from ._options import check_bool
from ._registration import (
    Registration,
    dispatch_input,
    dispatch_output,
    function_name,
    tool_call,
    turn_input,
    turn_output,
)

__all__ = ["Middleware"]


class Middleware:
    """A named set of middleware functions, registered with one decorator per stage.

    Pass the set in ``TurnRunner(middleware=[...])``; it implements
    ``pipeline.stages.MiddlewareProvider``. Decorators return the function unchanged; functions are
    adapted (hooks, sync code, ``tools=``, ``timed=``) once, when a runner asks for the specs.
    A plain ``async (ctx, call_next)`` function joins a set by calling the decorator on it:
    ``policy.dispatch_output(count_calls)``.

    Example::

        policy = Middleware("policy")

        @policy.dispatch_output
        async def count_calls(ctx: DispatchContext, call_next: CallNext) -> None:
            ...
            await call_next()

        @policy.turn_output(order=-10)
        def report(ctx: TurnContext) -> None: ...

    The stage decorators ``.turn_input``, ``.dispatch_input``, ``.dispatch_output`` and
    ``.turn_output`` are the module-level decorators of the same names, read through the set
    (options: ``order``, ``name``, ``timed``, and ``tools`` on ``dispatch_output``). They raise
    ``InvalidMiddlewareConfigError`` for bad options, a wrongly shaped function, or a function
    (or name) already registered on that stage of this set.

    Names in ``runner.describe_pipelines()`` are ``<set name>.<function name>`` unless a
    registration gives ``name=``.
    """

    __slots__ = ("_name", "_registrations", "_specs", "_timed")

    turn_input = turn_input
    dispatch_input = dispatch_input
    tool_call = tool_call
    dispatch_output = dispatch_output
    turn_output = turn_output

    def __init__(self, name: str, *, timed: bool = False) -> None:
        """Create an empty set.

        Args:
            name: The set's name, the prefix of its middleware names.
            timed: The default of every registration's ``timed=`` option.

        Raises:
            InvalidMiddlewareConfigError: ``name`` is empty or not a string, or ``timed`` is not
                a bool.
        """
        given: object = name  # checked at run time whatever the annotation says
        if not isinstance(given, str) or not given.strip():
            raise InvalidMiddlewareConfigError(
                f"a Middleware set needs a non-empty name, got {name!r}", option="name"
            )
        self._name = name
        self._timed = check_bool("Middleware", "timed", timed)
        self._registrations: list[Registration] = []
        self._specs: tuple[MiddlewareSpec, ...] | None = None

    def __repr__(self) -> str:
        """List the registered names per stage."""
        stages: dict[str, list[str]] = {}
        for reg in self._registrations:
            stages.setdefault(reg.stage, []).append(self._name_of(reg))
        inner = ", ".join(f"{stage}={names!r}" for stage, names in stages.items())
        return f"Middleware({self._name!r}{', ' if inner else ''}{inner})"

    def __len__(self) -> int:
        """Number of registrations (a function on two stages counts twice)."""
        return len(self._registrations)

    @property
    def name(self) -> str:
        """The set's name."""
        return self._name

    @property
    def timed(self) -> bool:
        """The default of every registration's ``timed=`` option."""
        return self._timed

    def names(self, stage: Stage) -> list[str]:
        """The names registered on ``stage``, in registration order."""
        return [self._name_of(reg) for reg in self._registrations if reg.stage == stage]

    def middleware_specs(self) -> Sequence[MiddlewareSpec]:
        """Return one adapted spec per registration, in registration order.

        Adaptation happens once per set (the result is cached until the next registration).
        """
        if self._specs is None:
            self._specs = tuple(reg.to_spec(self._name_of(reg)) for reg in self._registrations)
        return self._specs

    def add(self, reg: Registration) -> None:
        """Add a checked registration: what the stage decorators do with each function.

        Raises:
            InvalidMiddlewareConfigError: the function, or its name, is already registered on
                that stage of this set.
        """
        stage, new_name = reg.stage, self._name_of(reg)
        for other in self._registrations:
            if other.stage != stage:
                continue
            if other.fn is reg.fn:
                raise InvalidMiddlewareConfigError(
                    f"{function_name(reg.fn)!r} is already registered on {stage!r} of "
                    f"{self._name!r}",
                    middleware=new_name,
                    stage=stage,
                )
            if self._name_of(other) == new_name:
                raise InvalidMiddlewareConfigError(
                    f"another middleware named {new_name!r} is already registered on {stage!r}; "
                    "pass name= to tell them apart",
                    middleware=new_name,
                    stage=stage,
                )
        self._registrations.append(reg)
        self._specs = None

    def _name_of(self, reg: Registration) -> str:
        return reg.name or f"{self._name}.{function_name(reg.fn)}"


Middleware.__module__ = "middleware"
