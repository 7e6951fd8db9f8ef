from __future__ import annotations

import pickle
from typing import Any

import pytest

import pipeline.errors
from pipeline.errors import (
    AlreadySignalledError,
    ArgumentsLockedError,
    CallDeniedError,
    CallRejectedError,
    ConfigurationError,
    DispatchPipelineError,
    ExecutorError,
    GateAbortedError,
    GateError,
    GateTimeoutError,
    InputPipelineError,
    InvalidGateError,
    InvalidGateResolutionError,
    InvalidMediaError,
    InvalidMiddlewareConfigError,
    InvalidRunnerConfigError,
    InvalidStashValueError,
    InvalidToolArgsError,
    InvalidToolCallError,
    InvalidToolError,
    IterationLimitError,
    LoopError,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitedError,
    ModelRefusalError,
    ModelTimeoutError,
    ModelUnavailableError,
    NackedError,
    NextCalledTwiceError,
    NotASpoolReaderError,
    OutputPipelineError,
    PipelineError,
    PipelineShortCircuitedError,
    PolicyViolationError,
    StoreError,
    ToolAlreadyRegisteredError,
    ToolDownstreamError,
    ToolError,
    ToolNotFoundError,
    ToolUnavailableError,
    TurnAbortedError,
)

# (class, code, status, fatal): what docs/reference/errors.md lists, generated from the classes.
TABLE: list[tuple[type[LoopError], str, int, bool]] = [
    (InvalidToolError, "E_INVALID_INITIAL_TOOL_VALUE", 500, True),
    (InvalidToolArgsError, "E_INVALID_TOOL_ARGS", 422, False),
    (ToolDownstreamError, "E_TOOL_DOWNSTREAM_ERROR", 500, False),
    (ToolAlreadyRegisteredError, "E_TOOL_ALREADY_REGISTERED", 409, True),
    (ToolNotFoundError, "E_TOOL_NOT_FOUND", 404, False),
    (ToolUnavailableError, "E_TOOL_UNAVAILABLE", 403, False),
    (CallDeniedError, "E_CALL_DENIED", 403, False),
    (CallRejectedError, "E_CALL_REJECTED", 403, False),
    (ArgumentsLockedError, "E_ARGS_LOCKED", 409, False),
    (InvalidToolCallError, "E_INVALID_INITIAL_TOOL_CALL_VALUE", 500, True),
    (InvalidStashValueError, "E_INVALID_STASH_VALUE", 500, True),
    (AlreadySignalledError, "E_LLM_EXECUTION_ALREADY_SIGNALLED", 500, True),
    (NackedError, "E_NACKED", 500, False),
    (ExecutorError, "E_LLM_EXECUTION_EXECUTOR_ERROR", 500, False),
    (InputPipelineError, "E_INPUT_PIPELINE_ERROR", 500, False),
    (DispatchPipelineError, "E_DISPATCH_PIPELINE_ERROR", 500, False),
    (OutputPipelineError, "E_OUTPUT_PIPELINE_ERROR", 500, False),
    (PipelineShortCircuitedError, "E_PIPELINE_SHORT_CIRCUITED", 500, False),
    (NextCalledTwiceError, "E_NEXT_CALLED_TWICE", 500, True),
    (IterationLimitError, "E_ITERATION_LIMIT", 429, False),
    (TurnAbortedError, "E_TURN_ABORTED", 499, False),
    (InvalidRunnerConfigError, "E_INVALID_TURN_RUNNER_CONFIG", 529, True),
    (GateTimeoutError, "E_TURN_GATE_TIMEOUT", 408, False),
    (GateAbortedError, "E_TURN_GATE_ABORTED", 499, False),
    (InvalidGateResolutionError, "E_INVALID_TURN_GATE_RESOLUTION", 500, True),
    (InvalidGateError, "E_INVALID_INITIAL_TURN_GATE_VALUE", 500, True),
    (NotASpoolReaderError, "E_NOT_A_SPOOL_READER", 500, True),
    (InvalidMediaError, "E_INVALID_INITIAL_MEDIA_VALUE", 500, True),
    (PolicyViolationError, "E_POLICY_VIOLATION", 403, False),
    (InvalidMiddlewareConfigError, "E_INVALID_MIDDLEWARE_CONFIG", 500, True),
    (StoreError, "E_STORE_ERROR", 503, False),
    (ModelRateLimitedError, "E_MODEL_RATE_LIMITED", 429, False),
    (ModelAuthenticationError, "E_MODEL_AUTHENTICATION", 401, True),
    (ModelBadRequestError, "E_MODEL_BAD_REQUEST", 400, False),
    (ModelContextLengthError, "E_MODEL_CONTEXT_LENGTH", 413, False),
    (ModelUnavailableError, "E_MODEL_UNAVAILABLE", 503, False),
    (ModelTimeoutError, "E_MODEL_TIMEOUT", 504, False),
    (ModelRefusalError, "E_MODEL_REFUSAL", 422, False),
]
CLASSES = [row[0] for row in TABLE]
IDS = [cls.__name__ for cls in CLASSES]


@pytest.mark.parametrize(("cls", "code", "status", "fatal"), TABLE, ids=IDS)
def test_class_attributes_match_the_table(
    cls: type[LoopError], code: str, status: int, fatal: bool
) -> None:
    """code, status and fatal are the documented values, on the class and on instances."""
    assert (cls.code, cls.status, cls.fatal) == (code, status, fatal)
    err = cls()
    assert (err.code, err.status, err.fatal) == (code, status, fatal)


def test_codes_are_unique() -> None:
    """No two error classes share a code."""
    codes = [cls.code for cls in CLASSES]
    assert len(set(codes)) == len(codes)
    assert LoopError.code not in codes


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_reports_public_module_and_root(cls: type[LoopError]) -> None:
    """Every class is a LoopError (an Exception) and reports module ``pipeline.errors``."""
    assert issubclass(cls, LoopError)
    assert issubclass(cls, Exception)
    assert cls.__module__ == "pipeline.errors"
    assert getattr(pipeline.errors, cls.__name__) is cls


def test_root_reports_public_module() -> None:
    """LoopError itself reports module ``pipeline.errors`` and derives from Exception."""
    assert LoopError.__module__ == "pipeline.errors"
    assert LoopError.__mro__[1] is Exception


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (ToolNotFoundError, LookupError),
        (InvalidToolArgsError, ValueError),
        (InvalidMiddlewareConfigError, ValueError),
        (GateTimeoutError, TimeoutError),
        (NotASpoolReaderError, TypeError),
    ],
    ids=lambda v: v.__name__,
)
def test_builtin_bases(cls: type[LoopError], builtin: type[Exception]) -> None:
    """Where a builtin meaning fits, the class is also that builtin and can be caught as it."""
    assert issubclass(cls, builtin)
    with pytest.raises(builtin):
        raise cls("x")


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_str_is_code_colon_message(cls: type[LoopError]) -> None:
    """str(err) is "CODE: message" for an explicit message (LookupError's quoting included)."""
    err = cls("something went wrong")
    assert err.message == "something went wrong"
    assert str(err) == f"{cls.code}: something went wrong"


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_default_message(cls: type[LoopError]) -> None:
    """Without a message, each class has a non-empty default message of its own."""
    err = cls()
    assert isinstance(err.message, str)
    assert err.message
    assert str(err) == f"{cls.code}: {err.message}"


def test_default_messages_are_specific() -> None:
    """Each class's default message differs from the root's generic one."""
    generic = LoopError().message
    assert all(cls().message != generic for cls in CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_context_keywords_become_attributes(cls: type[LoopError]) -> None:
    """Context keywords given to the constructor are readable as attributes."""
    err = cls("boom", tool_name="search", stage="dispatch_input", call_id="tc-1")
    assert vars(err)["tool_name"] == "search"
    assert vars(err)["stage"] == "dispatch_input"
    assert vars(err)["call_id"] == "tc-1"
    assert str(err) == f"{cls.code}: boom"


@pytest.mark.parametrize("key", ["code", "status", "fatal", "default_message"])
def test_context_keywords_cannot_shadow_the_error_identity(key: str) -> None:
    """A context keyword named like code/status/fatal/message raises instead of overwriting it."""
    with pytest.raises(TypeError, match="reserved"):
        ToolDownstreamError("upstream failed", **{key: 503})  # type: ignore[arg-type]
    assert ToolDownstreamError("upstream failed", http_status=503).status == 500


def test_documented_context_defaults() -> None:
    """InvalidToolArgsError and PolicyViolationError carry their documented context fields."""
    args_error = InvalidToolArgsError()
    assert args_error.errors == []
    assert args_error.tool_name is None
    field_errors = [{"loc": ["q"], "msg": "required"}]
    assert InvalidToolArgsError("bad", errors=field_errors).errors == field_errors
    policy_error = PolicyViolationError()
    assert policy_error.policy == ""
    assert policy_error.details == {}
    custom = PolicyViolationError("stop", policy="repetition", details={"count": 3})
    assert (custom.policy, custom.details) == ("repetition", {"count": 3})


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_cause_chaining(cls: type[LoopError]) -> None:
    """``raise ... from exc`` keeps the original as __cause__."""
    original = RuntimeError("disk full")

    def fail() -> None:
        try:
            raise original
        except RuntimeError as exc:
            raise cls(f"wrapped: {exc}") from exc

    with pytest.raises(cls) as info:
        fail()
    assert info.value.__cause__ is original
    assert str(info.value) == f"{cls.code}: wrapped: disk full"


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_catchable_as_loop_error(cls: type[LoopError]) -> None:
    """Any error of the tree is caught by ``except LoopError``."""
    with pytest.raises(LoopError) as info:
        raise cls()
    assert type(info.value) is cls


def test_repr_names_the_class() -> None:
    """repr shows the class name and the message."""
    assert repr(ToolNotFoundError("no such tool")) == "ToolNotFoundError('no such tool')"


# The families and their members (the tree in pipeline/errors/__init__.py); every other error
# is directly under LoopError.
FAMILIES: dict[type[LoopError], list[type[LoopError]]] = {
    ConfigurationError: [
        InvalidToolError,
        InvalidToolCallError,
        InvalidStashValueError,
        InvalidRunnerConfigError,
        InvalidMiddlewareConfigError,
        InvalidGateError,
        InvalidMediaError,
        NotASpoolReaderError,
        ToolAlreadyRegisteredError,
    ],
    ToolError: [
        InvalidToolArgsError,
        ToolNotFoundError,
        ToolUnavailableError,
        CallDeniedError,
        CallRejectedError,
        ArgumentsLockedError,
        ToolDownstreamError,
    ],
    PipelineError: [
        InputPipelineError,
        DispatchPipelineError,
        OutputPipelineError,
        PipelineShortCircuitedError,
        NextCalledTwiceError,
    ],
    GateError: [GateTimeoutError, GateAbortedError, InvalidGateResolutionError],
    ModelError: [
        ModelRateLimitedError,
        ModelAuthenticationError,
        ModelBadRequestError,
        ModelContextLengthError,
        ModelUnavailableError,
        ModelTimeoutError,
        ModelRefusalError,
    ],
}
FAMILY_IDS = [family.__name__ for family in FAMILIES]
MEMBERS = [(family, member) for family, members in FAMILIES.items() for member in members]
UNGROUPED = [
    AlreadySignalledError,
    NackedError,
    ExecutorError,
    IterationLimitError,
    TurnAbortedError,
    PolicyViolationError,
    StoreError,
]


@pytest.mark.parametrize(
    ("family", "member"), MEMBERS, ids=[f"{f.__name__}-{m.__name__}" for f, m in MEMBERS]
)
def test_a_family_catches_its_members(family: type[LoopError], member: type[LoopError]) -> None:
    """``except <Family>`` catches every member, which keeps its own code and status."""
    with pytest.raises(family) as info:
        raise member("boom")
    assert type(info.value) is member
    assert info.value.code != family.code
    assert str(info.value) == f"{member.code}: boom"


@pytest.mark.parametrize("family", list(FAMILIES), ids=FAMILY_IDS)
def test_a_family_catches_nothing_outside_it(family: type[LoopError]) -> None:
    """No error outside a family (other families' members, the ungrouped ones) is its subclass."""
    outsiders = [cls for cls in CLASSES if cls not in FAMILIES[family]]
    assert not [cls.__name__ for cls in outsiders if issubclass(cls, family)]


@pytest.mark.parametrize("family", list(FAMILIES), ids=FAMILY_IDS)
def test_families_are_public_documented_loop_errors(family: type[LoopError]) -> None:
    """A family is a LoopError with a docstring, its own unique code, exported like the rest."""
    assert family.__mro__[1] is LoopError
    assert (family.__doc__ or "").strip()
    assert family.__module__ == "pipeline.errors"
    assert family.__name__ in pipeline.errors.__all__
    everything: list[type[LoopError]] = [*CLASSES, *FAMILIES, LoopError]
    codes = [cls.code for cls in everything]
    assert codes.count(family.code) == 1
    assert family.code.startswith("E_")
    err = family()
    assert err.message == family.default_message != LoopError.default_message


@pytest.mark.parametrize("cls", UNGROUPED, ids=lambda c: c.__name__)
def test_ungrouped_errors_stay_directly_under_loop_error(cls: type[LoopError]) -> None:
    """Errors outside the four families still derive from LoopError directly."""
    assert cls.__mro__[1] is LoopError


def test_every_error_is_in_one_family_or_ungrouped() -> None:
    """The families and the ungrouped list together hold every public error exactly once."""
    public = {getattr(pipeline.errors, name) for name in pipeline.errors.__all__} - {
        LoopError,
        *FAMILIES,
    }
    listed = [*UNGROUPED, *(member for _, member in MEMBERS)]
    assert len(listed) == len(set(listed))
    assert set(listed) == public


# (class, attribute, value when not given): every declared context attribute exists by default.
DEFAULTS: list[tuple[type[LoopError], str, object]] = [
    (ConfigurationError, "field", None),
    (InvalidToolError, "field", None),
    (InvalidToolCallError, "call_id", None),
    (InvalidStashValueError, "path", None),
    (InvalidRunnerConfigError, "fields", []),
    (InvalidRunnerConfigError, "spec", None),
    (InvalidMiddlewareConfigError, "option", None),
    (InvalidMiddlewareConfigError, "middleware", None),
    (InvalidMiddlewareConfigError, "stage", None),
    (InvalidMiddlewareConfigError, "extra", None),
    (InvalidMiddlewareConfigError, "field", None),
    (InvalidGateError, "field", None),
    (InvalidMediaError, "field", None),
    (NotASpoolReaderError, "reader_type", None),
    (ToolAlreadyRegisteredError, "tool_name", None),
    (ToolError, "tool_name", None),
    (ToolError, "call_id", None),
    (InvalidToolArgsError, "errors", []),
    (InvalidToolArgsError, "field", None),
    (ToolNotFoundError, "tool_name", None),
    (ToolNotFoundError, "call_id", None),
    (ToolUnavailableError, "policy", None),
    (ToolUnavailableError, "reason", None),
    (CallDeniedError, "policy", None),
    (CallDeniedError, "reason", None),
    (ToolDownstreamError, "line", None),
    (ToolDownstreamError, "format", None),
    (PipelineError, "stage", None),
    (PipelineShortCircuitedError, "stage", None),
    (NextCalledTwiceError, "middleware", None),
    (GateError, "gate_id", None),
    (GateTimeoutError, "timeout", None),
    (GateAbortedError, "reason", None),
    (InvalidGateResolutionError, "errors", []),
    (AlreadySignalledError, "dispatch_id", None),
    (NackedError, "dispatch_id", None),
    (IterationLimitError, "max_iterations", None),
    (TurnAbortedError, "turn_id", None),
    (TurnAbortedError, "gate_id", None),
    (TurnAbortedError, "stage", None),
    (PolicyViolationError, "policy", ""),
    (PolicyViolationError, "details", {}),
]


@pytest.mark.parametrize(
    ("cls", "attr", "default"), DEFAULTS, ids=[f"{c.__name__}.{a}" for c, a, _ in DEFAULTS]
)
def test_declared_context_attributes_default_sensibly(
    cls: type[LoopError], attr: str, default: object
) -> None:
    """Without a keyword, a declared attribute is None (or empty) on the instance, not missing;
    mutable defaults are fresh per instance; given, the keyword's value is kept as is."""
    err = cls()
    assert vars(err)[attr] == default
    if isinstance(default, list | dict):
        assert getattr(cls(), attr) is not getattr(err, attr)
    given = object()
    assert getattr(cls("m", **{attr: given}), attr) is given


def test_declared_context_attributes_are_typed_keywords() -> None:
    """Context attributes are keyword-only parameters with their values kept as given."""
    err = InvalidToolArgsError("bad", errors=[{"loc": ["q"]}], tool_name="search", call_id="c1")
    assert (err.errors, err.tool_name, err.call_id, err.field) == (
        [{"loc": ["q"]}],
        "search",
        "c1",
        None,
    )
    gate = GateTimeoutError("late", gate_id="g", timeout=1.5)
    assert (gate.gate_id, gate.timeout) == ("g", 1.5)
    with pytest.raises(TypeError):
        ToolNotFoundError("m", "search")  # type: ignore[call-arg]


def test_undeclared_context_keywords_still_become_attributes() -> None:
    """Built-in classes keep accepting other keywords (LoopError's contract), besides theirs."""
    err = ToolNotFoundError("m", tool_name="x", attempt=2)
    assert (err.tool_name, vars(err)["attempt"]) == ("x", 2)


@pytest.mark.parametrize("cls", [*CLASSES, *FAMILIES], ids=[*IDS, *FAMILY_IDS])
def test_errors_survive_pickling_with_their_context(cls: type[LoopError]) -> None:
    """A pickled error comes back with its class, message and context attributes."""
    err = cls("boom", stage="turn_input", extra_context={"n": 1})
    back: Any = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err)
    assert vars(back) == vars(err)
