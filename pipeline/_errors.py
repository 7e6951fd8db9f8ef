"""The one exception tree of loopware.

Every error raised by the framework derives from `LoopError`, carries a stable `code`, an
HTTP-like `status` and a `fatal` flag, and keeps its context as attributes::

    LoopError
    ├── InvalidToolError                (E_INVALID_INITIAL_TOOL_VALUE)
    ├── InvalidToolArgsError            (E_INVALID_TOOL_ARGS, also ValueError)
    ├── ToolDownstreamError             (E_TOOL_DOWNSTREAM_ERROR)
    ├── ToolAlreadyRegisteredError      (E_TOOL_ALREADY_REGISTERED)
    ├── ToolNotFoundError               (E_TOOL_NOT_FOUND, also LookupError)
    ├── InvalidToolCallError            (E_INVALID_INITIAL_TOOL_CALL_VALUE)
    ├── InvalidStashValueError          (E_INVALID_STASH_VALUE)
    ├── AlreadySignalledError           (E_LLM_EXECUTION_ALREADY_SIGNALLED)
    ├── NackedError                     (E_NACKED)
    ├── ExecutorError                   (E_LLM_EXECUTION_EXECUTOR_ERROR)
    ├── InputPipelineError              (E_INPUT_PIPELINE_ERROR)
    ├── DispatchPipelineError           (E_DISPATCH_PIPELINE_ERROR)
    ├── OutputPipelineError             (E_OUTPUT_PIPELINE_ERROR)
    ├── PipelineShortCircuitedError     (E_PIPELINE_SHORT_CIRCUITED)
    ├── NextCalledTwiceError            (E_NEXT_CALLED_TWICE)
    ├── IterationLimitError             (E_ITERATION_LIMIT)
    ├── TurnAbortedError                (E_TURN_ABORTED)
    ├── InvalidRunnerConfigError        (E_INVALID_TURN_RUNNER_CONFIG)
    ├── InvalidMiddlewareConfigError    (E_INVALID_MIDDLEWARE_CONFIG, also ValueError)
    ├── GateTimeoutError                (E_TURN_GATE_TIMEOUT, also TimeoutError)
    ├── GateAbortedError                (E_TURN_GATE_ABORTED)
    ├── InvalidGateResolutionError      (E_INVALID_TURN_GATE_RESOLUTION)
    ├── InvalidGateError                (E_INVALID_INITIAL_TURN_GATE_VALUE)
    ├── NotASpoolReaderError            (E_NOT_A_SPOOL_READER, also TypeError)
    ├── InvalidMediaError               (E_INVALID_INITIAL_MEDIA_VALUE)
    ├── PolicyViolationError            (E_POLICY_VIOLATION)
    └── StoreError                      (E_STORE_ERROR)

`str(err)` is `"CODE: message"`. Causes are chained with ``raise ... from exc``.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AlreadySignalledError",
    "DispatchPipelineError",
    "ExecutorError",
    "GateAbortedError",
    "GateTimeoutError",
    "InputPipelineError",
    "InvalidGateError",
    "InvalidGateResolutionError",
    "InvalidMediaError",
    "InvalidMiddlewareConfigError",
    "InvalidRunnerConfigError",
    "InvalidStashValueError",
    "InvalidToolArgsError",
    "InvalidToolCallError",
    "InvalidToolError",
    "IterationLimitError",
    "LoopError",
    "NackedError",
    "NextCalledTwiceError",
    "NotASpoolReaderError",
    "OutputPipelineError",
    "PipelineShortCircuitedError",
    "PolicyViolationError",
    "StoreError",
    "ToolAlreadyRegisteredError",
    "ToolDownstreamError",
    "ToolNotFoundError",
    "TurnAbortedError",
]


_RESERVED = frozenset({"code", "status", "fatal", "message", "default_message"})
"""Attributes a context keyword may not overwrite."""


class LoopError(Exception):
    """Root of every loopware error.

    Attributes:
        code: Stable machine-readable code, always starting with ``E_``.
        status: HTTP-like status number.
        fatal: True for developer errors that no retry can fix.
        message: The human-readable message (without the code prefix).
    """

    code: ClassVar[str] = "E_LOOP_ERROR"
    status: ClassVar[int] = 500
    fatal: ClassVar[bool] = False
    default_message: ClassVar[str] = "loopware error"

    def __init__(self, message: str | None = None, **context: Any) -> None:
        """Build the error; every keyword in ``context`` becomes an attribute.

        Raises:
            TypeError: a context keyword would shadow ``code``, ``status``, ``fatal``,
                ``message`` or ``default_message`` (they are the error's stable identity).
        """
        if not _RESERVED.isdisjoint(context):
            clash = sorted(_RESERVED.intersection(context))
            raise TypeError(f"{type(self).__name__}: context keywords {clash} are reserved")
        self.message = message if message is not None else self.default_message
        for key, value in context.items():
            setattr(self, key, value)
        super().__init__(self.message)

    def __str__(self) -> str:
        """Return ``"CODE: message"``."""
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        """Return a constructor-like representation."""
        return f"{type(self).__name__}({self.message!r})"


class InvalidToolError(LoopError):
    """A Tool was built from bad parts; the message names the field."""

    code = "E_INVALID_INITIAL_TOOL_VALUE"
    status = 500
    fatal = True
    default_message = "invalid tool"


class InvalidToolArgsError(LoopError, ValueError):
    """Arguments failed the tool's input schema; ``errors`` holds the field errors."""

    code = "E_INVALID_TOOL_ARGS"
    status = 422
    fatal = False
    default_message = "invalid tool arguments"
    errors: list[dict[str, Any]]
    tool_name: str | None

    def __init__(self, message: str | None = None, **context: Any) -> None:
        """Build the error with empty ``errors`` and ``tool_name`` unless given."""
        context.setdefault("errors", [])
        context.setdefault("tool_name", None)
        super().__init__(message, **context)


class ToolDownstreamError(LoopError):
    """A tool handler raised; ``__cause__`` is the original exception."""

    code = "E_TOOL_DOWNSTREAM_ERROR"
    status = 500
    fatal = False
    default_message = "tool handler failed"


class ToolAlreadyRegisteredError(LoopError):
    """A tool name clashed in a registry; ``tool_name`` names it."""

    code = "E_TOOL_ALREADY_REGISTERED"
    status = 409
    fatal = True
    default_message = "tool already registered"


class ToolNotFoundError(LoopError, LookupError):
    """A call named a tool that is not in the turn's registry."""

    code = "E_TOOL_NOT_FOUND"
    status = 404
    fatal = False
    default_message = "tool not found"

    def __str__(self) -> str:
        """Return ``"CODE: message"`` (not LookupError's quoted form)."""
        return f"{self.code}: {self.message}"


class InvalidToolCallError(LoopError):
    """A ToolCall record was built from bad parts."""

    code = "E_INVALID_INITIAL_TOOL_CALL_VALUE"
    status = 500
    fatal = True
    default_message = "invalid tool call"


class InvalidStashValueError(LoopError):
    """A stash seed or value is not plain data, or a path is malformed; ``path`` names it."""

    code = "E_INVALID_STASH_VALUE"
    status = 500
    fatal = True
    default_message = "invalid stash value"
    path: str | None

    def __init__(self, message: str | None = None, **context: Any) -> None:
        """Build the error with ``path`` defaulted to None."""
        context.setdefault("path", None)
        super().__init__(message, **context)


class AlreadySignalledError(LoopError):
    """A dispatch was acked or nacked a second time."""

    code = "E_LLM_EXECUTION_ALREADY_SIGNALLED"
    status = 500
    fatal = True
    default_message = "the dispatch was already acked or nacked"


class NackedError(LoopError):
    """The dispatch was nacked without an explicit error."""

    code = "E_NACKED"
    status = 500
    fatal = False
    default_message = "the dispatch was nacked"


class ExecutorError(LoopError):
    """The executor raised; the message ends with ``: <cause message>``."""

    code = "E_LLM_EXECUTION_EXECUTOR_ERROR"
    status = 500
    fatal = False
    default_message = "the executor failed"


class InputPipelineError(LoopError):
    """A turn input middleware raised."""

    code = "E_INPUT_PIPELINE_ERROR"
    status = 500
    fatal = False
    default_message = "a turn input middleware failed"


class DispatchPipelineError(LoopError):
    """A dispatch input or output middleware raised."""

    code = "E_DISPATCH_PIPELINE_ERROR"
    status = 500
    fatal = False
    default_message = "a dispatch middleware failed"


class OutputPipelineError(LoopError):
    """A turn output middleware raised."""

    code = "E_OUTPUT_PIPELINE_ERROR"
    status = 500
    fatal = False
    default_message = "a turn output middleware failed"


class PipelineShortCircuitedError(LoopError):
    """A stage ended without reaching its end; ``stage`` names it."""

    code = "E_PIPELINE_SHORT_CIRCUITED"
    status = 500
    fatal = False
    default_message = "a middleware returned without calling call_next()"


class NextCalledTwiceError(LoopError):
    """A middleware awaited ``call_next()`` twice."""

    code = "E_NEXT_CALLED_TWICE"
    status = 500
    fatal = True
    default_message = "call_next() was awaited twice by one middleware"


class IterationLimitError(LoopError):
    """The dispatch reached ``max_iterations``."""

    code = "E_ITERATION_LIMIT"
    status = 429
    fatal = False
    default_message = "the dispatch reached its iteration limit"


class TurnAbortedError(LoopError):
    """Raised inside a turn after an abort; classified as an abort, not a failure."""

    code = "E_TURN_ABORTED"
    status = 499
    fatal = False
    default_message = "the turn was aborted"


class InvalidRunnerConfigError(LoopError):
    """Bad runner configuration; the message names every bad field."""

    code = "E_INVALID_TURN_RUNNER_CONFIG"
    status = 529
    fatal = True
    default_message = "invalid turn runner configuration"


class InvalidMiddlewareConfigError(LoopError, ValueError):
    """Bad options were given to a built-in middleware or a registration decorator."""

    code = "E_INVALID_MIDDLEWARE_CONFIG"
    status = 500
    fatal = True
    default_message = "invalid middleware configuration"


class GateTimeoutError(LoopError, TimeoutError):
    """An approval gate was not settled before its timeout."""

    code = "E_TURN_GATE_TIMEOUT"
    status = 408
    fatal = False
    default_message = "the gate timed out"


class GateAbortedError(LoopError):
    """An approval gate was aborted, directly or by aborting its turn."""

    code = "E_TURN_GATE_ABORTED"
    status = 499
    fatal = False
    default_message = "the gate was aborted"


class InvalidGateResolutionError(LoopError):
    """A gate resolution failed the gate's schema; the gate stays open."""

    code = "E_INVALID_TURN_GATE_RESOLUTION"
    status = 500
    fatal = True
    default_message = "invalid gate resolution"


class InvalidGateError(LoopError):
    """A Gate was built from bad parts."""

    code = "E_INVALID_INITIAL_TURN_GATE_VALUE"
    status = 500
    fatal = True
    default_message = "invalid gate"


class NotASpoolReaderError(LoopError, TypeError):
    """An artifact was built over something that is not a spool reader."""

    code = "E_NOT_A_SPOOL_READER"
    status = 500
    fatal = True
    default_message = "not a spool reader"


class InvalidMediaError(LoopError):
    """A Media value was built from bad parts."""

    code = "E_INVALID_INITIAL_MEDIA_VALUE"
    status = 500
    fatal = True
    default_message = "invalid media"


class PolicyViolationError(LoopError):
    """A built-in policy middleware ended a dispatch; ``policy`` and ``details`` say why."""

    code = "E_POLICY_VIOLATION"
    status = 403
    fatal = False
    default_message = "a policy was violated"
    policy: str
    details: dict[str, Any]

    def __init__(self, message: str | None = None, **context: Any) -> None:
        """Build the error with ``policy`` and ``details`` defaulted when absent."""
        context.setdefault("policy", "")
        context.setdefault("details", {})
        super().__init__(message, **context)


class StoreError(LoopError):
    """The turn store failed to load or save (the turn cannot promise durability)."""

    code = "E_STORE_ERROR"
    status = 503
    fatal = False
    default_message = "the turn store failed"


def _publish() -> None:
    for name in __all__:
        globals()[name].__module__ = "pipeline"


_publish()
