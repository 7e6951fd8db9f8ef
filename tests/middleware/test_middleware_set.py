"""`Middleware` sets and the module-level decorators: registration, options, names, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from middleware import Middleware, dispatch_input, dispatch_output, turn_input, turn_output
from pipeline import DispatchContext, TurnContext
from pipeline.errors import InvalidMiddlewareConfigError
from pipeline.stages import CallNext, MethodRegistration, MiddlewareProvider

STAGE_NAMES = ("turn_input", "dispatch_input", "dispatch_output", "turn_output")


async def turn_mw(ctx: TurnContext, call_next: CallNext) -> None:
    await call_next()


async def dispatch_mw(ctx: DispatchContext, call_next: CallNext) -> None:
    await call_next()


def test_decorators_return_the_function_unchanged() -> None:
    """Bare and keyword registration both hand back the very same function object."""
    mw = Middleware("policy")
    assert mw.turn_input(turn_mw) is turn_mw
    assert mw.dispatch_output(order=3, name="x")(dispatch_mw) is dispatch_mw
    assert not hasattr(turn_mw, "__loopware_registrations__")


def test_a_set_is_a_middleware_provider_with_specs_in_registration_order() -> None:
    """`middleware_specs()` lists one spec per registration, with stage, name and order."""
    mw = Middleware("policy")

    @mw.dispatch_output(order=-2)
    async def first(ctx: DispatchContext, call_next: CallNext) -> None:
        await call_next()

    @mw.turn_input
    def second(ctx: TurnContext) -> None:
        return None

    assert isinstance(mw, MiddlewareProvider)
    specs = list(mw.middleware_specs())
    assert [(s.stage, s.name, s.order) for s in specs] == [
        ("dispatch_output", "policy.first", -2),
        ("turn_input", "policy.second", 0),
    ]
    assert len(mw) == 2
    assert mw.names("turn_input") == ["policy.second"]
    assert "policy.first" in repr(mw)


def test_name_option_replaces_the_default_name() -> None:
    """`name=` is the middleware's name; otherwise it is `<set>.<function>`."""
    mw = Middleware("audit")
    mw.turn_output(name="write-report")(turn_mw)
    mw.turn_input(turn_mw)
    assert [s.name for s in mw.middleware_specs()] == ["write-report", "audit.turn_mw"]


def test_an_async_two_argument_middleware_is_passed_through_unwrapped() -> None:
    """The hot path pays nothing: the spec's fn is the registered function itself."""
    mw = Middleware("fast")
    mw.dispatch_output(dispatch_mw)
    (spec,) = mw.middleware_specs()
    assert spec.fn is dispatch_mw


def test_specs_are_adapted_once_and_cached_until_the_next_registration() -> None:
    """Asking twice gives the same adapted callables; registering again rebuilds them."""
    mw = Middleware("hooks")

    @mw.turn_input
    def hook(ctx: TurnContext) -> None:
        return None

    first = mw.middleware_specs()
    assert mw.middleware_specs() is first
    mw.turn_output(turn_mw)
    assert mw.middleware_specs() is not first
    assert len(mw.middleware_specs()) == 2


@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_registering_the_same_function_twice_on_a_stage_raises(stage: str) -> None:
    """A duplicate registration fails at decoration time with the config error."""
    mw = Middleware("dup")
    fn = dispatch_mw if stage.startswith("dispatch") else turn_mw
    getattr(mw, stage)(fn)
    with pytest.raises(InvalidMiddlewareConfigError, match="already registered") as info:
        getattr(mw, stage)(order=5)(fn)
    assert info.value.code == "E_INVALID_MIDDLEWARE_CONFIG"
    assert vars(info.value)["stage"] == stage


def test_the_same_function_may_serve_two_stages_of_one_set() -> None:
    """Duplicates are per stage: input and output registrations of one function coexist."""
    mw = Middleware("both")
    mw.dispatch_input(dispatch_mw)
    mw.dispatch_output(dispatch_mw)
    assert [s.stage for s in mw.middleware_specs()] == ["dispatch_input", "dispatch_output"]


def test_two_functions_with_one_name_on_a_stage_raise() -> None:
    """Names identify middleware in describe_pipelines, so a clash on a stage is refused."""
    mw = Middleware("names")
    mw.turn_input(name="same")(turn_mw)

    async def other(ctx: TurnContext, call_next: CallNext) -> None:
        await call_next()

    with pytest.raises(InvalidMiddlewareConfigError, match="named 'same'"):
        mw.turn_input(name="same")(other)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"order": "1"}, "order must be an int"),
        ({"order": 1.5}, "order must be an int"),
        ({"order": True}, "order must be an int"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"name": "   "}, "name must be a non-empty string"),
        ({"name": 7}, "name must be a non-empty string"),
        ({"tools": []}, "at least one tool"),
        ({"tools": "search"}, "collection of tool names"),
        ({"tools": ["search", ""]}, "non-empty tool names"),
        ({"tools": [3]}, "non-empty tool names"),
        ({"tools": 5}, "collection of tool names"),
        ({"timed": "yes"}, "timed must be a bool"),
    ],
    ids=[
        "order-str",
        "order-float",
        "order-bool",
        "name-empty",
        "name-blank",
        "name-int",
        "tools-empty",
        "tools-bare-string",
        "tools-empty-name",
        "tools-non-string",
        "tools-not-collection",
        "timed-not-bool",
    ],
)
def test_bad_options_raise_at_the_decorator_call(options: dict[str, Any], match: str) -> None:
    """Every bad option is refused before any function is handed over."""
    mw = Middleware("bad")
    with pytest.raises(InvalidMiddlewareConfigError, match=match):
        mw.dispatch_output(**options)


def test_option_errors_name_the_decorator_they_were_given_to() -> None:
    """A bad option's message says which decorator of which set (or module) refused it."""
    with pytest.raises(InvalidMiddlewareConfigError, match=r"Middleware\('bad'\)\.turn_input: "):
        Middleware("bad").turn_input(order="first")  # type: ignore[call-overload]
    with pytest.raises(InvalidMiddlewareConfigError, match=r"middleware\.turn_output: "):
        turn_output(name="")


def test_an_unknown_option_is_a_type_error() -> None:
    """The decorators take exactly the documented keyword options."""
    with pytest.raises(TypeError, match="ordr"):
        Middleware("typo").turn_input(ordr=1)  # type: ignore[call-overload]


@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_a_sets_decorators_are_the_module_level_decorators_read_through_the_set(
    stage: str,
) -> None:
    """One registration core: `Middleware.<stage>` is the module-level decorator itself."""
    module_level = {
        "turn_input": turn_input,
        "dispatch_input": dispatch_input,
        "dispatch_output": dispatch_output,
        "turn_output": turn_output,
    }[stage]
    assert getattr(Middleware, stage) is module_level
    assert repr(module_level) == f"middleware.{stage}"
    assert repr(getattr(Middleware("policy"), stage)) == f"Middleware('policy').{stage}"


@pytest.mark.parametrize("stage", ["turn_input", "turn_output", "dispatch_input"])
def test_tools_filter_is_refused_where_no_calls_are_visible(stage: str) -> None:
    """`tools=` needs the iteration's completed calls, which only dispatch_output sees."""
    mw = Middleware("bad")
    with pytest.raises(InvalidMiddlewareConfigError, match="only dispatch_output") as info:
        getattr(mw, stage)(tools=["search"])
    assert vars(info.value)["option"] == "tools"


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (42, "not callable"),
        (lambda: None, "takes no context argument"),
        (lambda ctx, call_next, extra: None, "needs 3 arguments"),
        (lambda ctx, *, must: None, "required keyword-only parameter"),
    ],
    ids=["not-callable", "no-arguments", "three-arguments", "required-keyword"],
)
def test_wrongly_shaped_functions_raise_at_decoration(fn: Any, match: str) -> None:
    """Shapes that can never be called as (ctx) or (ctx, call_next) are refused up front."""
    mw = Middleware("shapes")
    with pytest.raises(InvalidMiddlewareConfigError, match=match):
        mw.dispatch_output(fn)


def test_generator_functions_are_refused() -> None:
    """A generator cannot be a middleware: it would never run its body."""
    mw = Middleware("shapes")

    def gen(ctx: TurnContext) -> Any:
        yield ctx

    with pytest.raises(InvalidMiddlewareConfigError, match="generator"):
        mw.turn_input(gen)


@pytest.mark.parametrize("name", ["", "  ", None, 3])
def test_a_set_needs_a_name(name: Any) -> None:
    """`Middleware(name)` validates its name."""
    with pytest.raises(InvalidMiddlewareConfigError, match="non-empty name"):
        Middleware(name)


def test_a_set_rejects_a_non_bool_timed_default() -> None:
    """The set-wide timed default is validated like the per-registration option."""
    with pytest.raises(InvalidMiddlewareConfigError, match="timed must be a bool"):
        Middleware("x", timed=1)  # type: ignore[arg-type]


# -- class-based middleware ----------------------------------------------------------------


class Quota:
    """A class-based middleware written with the module-level decorators."""

    def __init__(self, label: str) -> None:
        self.label = label

    @turn_input(order=-1)
    async def begin(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Mark the turn."""
        ctx.stash.set(f"{self.label}.begun", True)
        await call_next()

    @dispatch_input
    @dispatch_output(name="quota-after")
    def tick(self, ctx: DispatchContext) -> None:
        """Count every dispatch stage run."""
        ctx.stash.update(f"{self.label}.ticks", lambda n: n + 1, default=0)

    @turn_output
    async def end(self, ctx: TurnContext) -> None:
        ctx.stash.set(f"{self.label}.ended", True)


def test_module_level_decorators_attach_registrations_and_return_the_method() -> None:
    """The method keeps its identity and carries one registration per stage."""
    regs = Quota.__dict__["tick"].__loopware_registrations__
    assert [r.stage for r in regs] == ["dispatch_output", "dispatch_input"]
    assert all(callable(r.bind) for r in regs)
    as_protocol: list[MethodRegistration] = list(regs)  # mypy checks the protocol
    assert len(as_protocol) == 2
    assert Quota.tick.__doc__ == "Count every dispatch stage run."


def test_binding_names_methods_after_the_class_unless_named() -> None:
    """`bind(instance)` yields `<ClassName>.<method>` names and bound, adapted callables."""
    quota = Quota("q")
    specs = [
        reg.bind(quota)
        for attr in ("begin", "tick", "end")
        for reg in Quota.__dict__[attr].__loopware_registrations__
    ]
    assert [(s.stage, s.name, s.order) for s in specs] == [
        ("turn_input", "Quota.begin", -1),
        ("dispatch_output", "quota-after", 0),
        ("dispatch_input", "Quota.tick", 0),
        ("turn_output", "Quota.end", 0),
    ]
    assert specs[0].fn == quota.begin  # a two-argument async method is bound, not wrapped


async def test_bound_specs_run_against_their_own_instance() -> None:
    """Two instances of one class keep their own configuration."""
    from pipeline.testing import make_dispatch_context

    ctx = make_dispatch_context()
    for label in ("a", "b"):
        quota = Quota(label)
        (reg,) = Quota.__dict__["end"].__loopware_registrations__
        spec = reg.bind(quota)
        reached: list[str] = []

        async def inner(seen: list[str] = reached, label: str = label) -> None:
            seen.append(label)

        await spec.fn(ctx.turn, inner)
        assert ctx.stash.get(f"{label}.ended") is True
        assert reached == [label]


async def test_an_undecorated_override_runs_in_place_of_the_registered_method() -> None:
    """A subclass overriding a registered method (even as a sync hook) runs its own code."""
    from pipeline.testing import make_dispatch_context

    class StrictQuota(Quota):
        def tick(self, ctx: DispatchContext) -> None:
            ctx.stash.update(f"{self.label}.strict", lambda n: n + 1, default=0)

    ctx = make_dispatch_context()
    (reg, _) = Quota.__dict__["tick"].__loopware_registrations__
    spec = reg.bind(StrictQuota("s"))
    reached: list[bool] = []

    async def inner() -> None:
        reached.append(True)

    await spec.fn(ctx, inner)
    assert (spec.name, ctx.stash.get("s.strict"), ctx.stash.get("s.ticks")) == (
        "quota-after", 1, None
    )
    assert reached == [True]


def test_registering_a_method_twice_on_a_stage_raises() -> None:
    """Stacking the same stage decorator twice on one method is refused at class creation."""
    with pytest.raises(InvalidMiddlewareConfigError, match="already registered"):

        class Twice:
            @dispatch_output
            @dispatch_output(order=1)
            async def check(self, ctx: DispatchContext, call_next: CallNext) -> None:
                await call_next()


def test_module_level_decorators_need_a_self_parameter() -> None:
    """A method without `self` cannot be bound, so it is refused."""
    with pytest.raises(InvalidMiddlewareConfigError, match="takes no 'self'"):
        turn_output(lambda: None)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "decorator", [turn_input, dispatch_input, dispatch_output, turn_output], ids=STAGE_NAMES
)
def test_module_level_decorators_validate_options(decorator: Callable[..., Any]) -> None:
    """The module-level decorators share the option checks of the set decorators."""
    with pytest.raises(InvalidMiddlewareConfigError, match="order must be an int"):
        decorator(order="late")


def test_callable_objects_that_cannot_bind_are_refused_by_method_decorators() -> None:
    """A callable instance has no descriptor binding, so it cannot be a method registration."""

    class Callable3:
        def __call__(self, owner: object, ctx: DispatchContext) -> None:
            return None

    with pytest.raises(InvalidMiddlewareConfigError, match="cannot be bound"):
        dispatch_output(Callable3())


def test_static_and_class_methods_are_refused() -> None:
    """Only plain methods can be bound to an instance."""
    with pytest.raises(InvalidMiddlewareConfigError, match="staticmethod"):
        dispatch_output(staticmethod(dispatch_mw))  # type: ignore[type-var]
