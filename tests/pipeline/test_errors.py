from __future__ import annotations

import pytest

import pipeline
from pipeline import (
    AlreadySignalledError,
    DispatchPipelineError,
    ExecutorError,
    GateAbortedError,
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
    NackedError,
    NextCalledTwiceError,
    NotASpoolReaderError,
    OutputPipelineError,
    PipelineShortCircuitedError,
    PolicyViolationError,
    ToolAlreadyRegisteredError,
    ToolDownstreamError,
    ToolNotFoundError,
    TurnAbortedError,
)

# (class, code, status, fatal): DESIGN section 2's table, plus section 12's middleware config error.
TABLE: list[tuple[type[LoopError], str, int, bool]] = [
    (InvalidToolError, "E_INVALID_INITIAL_TOOL_VALUE", 500, True),
    (InvalidToolArgsError, "E_INVALID_TOOL_ARGS", 422, False),
    (ToolDownstreamError, "E_TOOL_DOWNSTREAM_ERROR", 500, False),
    (ToolAlreadyRegisteredError, "E_TOOL_ALREADY_REGISTERED", 409, True),
    (ToolNotFoundError, "E_TOOL_NOT_FOUND", 404, False),
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
    """Every class is a LoopError (an Exception) and reports module ``pipeline``."""
    assert issubclass(cls, LoopError)
    assert issubclass(cls, Exception)
    assert cls.__module__ == "pipeline"
    assert getattr(pipeline, cls.__name__) is cls


def test_root_reports_public_module() -> None:
    """LoopError itself reports module ``pipeline`` and derives from Exception."""
    assert LoopError.__module__ == "pipeline"
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
        ToolDownstreamError("upstream failed", **{key: 503})
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
