"""`Middleware`: a named, ordered, inspectable set of stage registrations."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, overload

from pipeline import InvalidMiddlewareConfigError, MiddlewareSpec, Stage

from ._adapt import inspect_shape
from ._protocols import DispatchT, TurnT
from ._registration import Registration, check_options, function_name

__all__ = ["Middleware"]


class Middleware:
    """A named set of middleware functions, registered with one decorator per stage.

    Pass the set in ``TurnRunner(middleware=[...])``; it implements
    ``pipeline.MiddlewareProvider``. Decorators return the function unchanged; functions are
    adapted (hooks, sync code, ``tools=``, ``timed=``) once, when a runner asks for the specs.

    Example::

        policy = Middleware("policy")

        @policy.dispatch_output
        async def count_calls(ctx: DispatchContext, call_next: CallNext) -> None:
            ...
            await call_next()

        @policy.turn_output(order=-10)
        def report(ctx: TurnContext) -> None: ...

    Names in ``runner.describe_pipelines()`` are ``<set name>.<function name>`` unless a
    registration gives ``name=``.
    """

    __slots__ = ("_name", "_registrations", "_specs", "_timed")

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
        if not isinstance(timed, bool):
            raise InvalidMiddlewareConfigError(
                f"timed must be a bool, got {timed!r}", option="timed"
            )
        self._name = name
        self._timed = timed
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

    # -- registration --------------------------------------------------------------------------
    def _name_of(self, reg: Registration) -> str:
        return reg.name or f"{self._name}.{function_name(reg.fn)}"

    def _add(
        self,
        stage: Stage,
        fn: object,
        order: int,
        name: str | None,
        tools: frozenset[str] | None,
        timed: bool,
    ) -> None:
        shape = inspect_shape(fn, method=False)
        reg = Registration(
            stage=stage,
            fn=fn,  # type: ignore[arg-type]  # inspect_shape proved it callable
            shape=shape,
            order=order,
            name=name,
            tools=tools,
            timed=timed,
        )
        new_name = self._name_of(reg)
        for other in self._registrations:
            if other.stage != stage:
                continue
            if other.fn is fn:
                raise InvalidMiddlewareConfigError(
                    f"{function_name(fn)!r} is already registered on {stage!r} of {self._name!r}",
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

    def _decorate(
        self, stage: Stage, fn: object, order: object, name: object, tools: object, timed: object
    ) -> Any:
        options = check_options(stage, order, name, tools, self._timed if timed is None else timed)
        if fn is not None:
            self._add(stage, fn, *options)
            return fn

        def register(func: object) -> object:
            self._add(stage, func, *options)
            return func

        return register

    @overload
    def turn_input(self, fn: TurnT, /) -> TurnT: ...
    @overload
    def turn_input(
        self,
        fn: None = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        timed: bool | None = None,
    ) -> Callable[[TurnT], TurnT]: ...
    def turn_input(
        self,
        fn: object = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        tools: Collection[str] | None = None,
        timed: bool | None = None,
    ) -> Any:
        """Register a turn input middleware or hook (``TurnContext``), bare or with options.

        Args:
            fn: The function (bare form).
            order: Lower runs outer.
            name: The name in ``describe_pipelines()``; default ``<set name>.<function name>``.
            tools: Not valid on a turn stage (raises); see `dispatch_output`.
            timed: Emit a ``middleware.timing`` debug log per run (default: the set's).

        Raises:
            InvalidMiddlewareConfigError: bad options, a wrongly shaped function, or the function
                (or its name) is already registered on this stage of this set.
        """
        return self._decorate("turn_input", fn, order, name, tools, timed)

    @overload
    def dispatch_input(self, fn: DispatchT, /) -> DispatchT: ...
    @overload
    def dispatch_input(
        self,
        fn: None = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        timed: bool | None = None,
    ) -> Callable[[DispatchT], DispatchT]: ...
    def dispatch_input(
        self,
        fn: object = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        tools: Collection[str] | None = None,
        timed: bool | None = None,
    ) -> Any:
        """Register a dispatch input middleware or hook (``DispatchContext``).

        Args:
            fn: The function (bare form).
            order: Lower runs outer.
            name: The name in ``describe_pipelines()``; default ``<set name>.<function name>``.
            tools: Not valid here (raises): the iteration has made no calls yet.
            timed: Emit a ``middleware.timing`` debug log per run (default: the set's).

        Raises:
            InvalidMiddlewareConfigError: bad options, a wrongly shaped function, or the function
                (or its name) is already registered on this stage of this set.
        """
        return self._decorate("dispatch_input", fn, order, name, tools, timed)

    @overload
    def dispatch_output(self, fn: DispatchT, /) -> DispatchT: ...
    @overload
    def dispatch_output(
        self,
        fn: None = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        tools: Collection[str] | None = None,
        timed: bool | None = None,
    ) -> Callable[[DispatchT], DispatchT]: ...
    def dispatch_output(
        self,
        fn: object = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        tools: Collection[str] | None = None,
        timed: bool | None = None,
    ) -> Any:
        """Register a dispatch output middleware or hook (``DispatchContext``).

        This is where middleware react to ``ctx.new_tool_calls``, the calls the executor
        completed in this iteration.

        Args:
            fn: The function (bare form).
            order: Lower runs outer.
            name: The name in ``describe_pipelines()``; default ``<set name>.<function name>``.
            tools: Run only for iterations whose ``ctx.new_tool_calls`` include one of these.
            timed: Emit a ``middleware.timing`` debug log per run (default: the set's).

        Raises:
            InvalidMiddlewareConfigError: bad options, a wrongly shaped function, or the function
                (or its name) is already registered on this stage of this set.
        """
        return self._decorate("dispatch_output", fn, order, name, tools, timed)

    @overload
    def turn_output(self, fn: TurnT, /) -> TurnT: ...
    @overload
    def turn_output(
        self,
        fn: None = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        timed: bool | None = None,
    ) -> Callable[[TurnT], TurnT]: ...
    def turn_output(
        self,
        fn: object = None,
        /,
        *,
        order: int = 0,
        name: str | None = None,
        tools: Collection[str] | None = None,
        timed: bool | None = None,
    ) -> Any:
        """Register a turn output middleware or hook (``TurnContext``), run after an acked dispatch.

        Args:
            fn: The function (bare form).
            order: Lower runs outer.
            name: The name in ``describe_pipelines()``; default ``<set name>.<function name>``.
            tools: Not valid on a turn stage (raises); see `dispatch_output`.
            timed: Emit a ``middleware.timing`` debug log per run (default: the set's).

        Raises:
            InvalidMiddlewareConfigError: bad options, a wrongly shaped function, or the function
                (or its name) is already registered on this stage of this set.
        """
        return self._decorate("turn_output", fn, order, name, tools, timed)


Middleware.__module__ = "middleware"
