"""The `LoopError` tree: every error loopware raises, with its stable `E_...` code.

Every error raised by the framework derives from `LoopError`, carries a stable `code`, an
HTTP-like `status` and a `fatal` flag, and keeps its context as typed attributes. Four families
group the errors a caller handles alike; catch a family to handle all of its members::

    LoopError
    ├── ConfigurationError                 (E_CONFIGURATION_ERROR; .field)
    │   ├── InvalidToolError               (E_INVALID_INITIAL_TOOL_VALUE)
    │   ├── InvalidToolCallError           (E_INVALID_INITIAL_TOOL_CALL_VALUE)
    │   ├── InvalidStashValueError         (E_INVALID_STASH_VALUE)
    │   ├── InvalidRunnerConfigError       (E_INVALID_TURN_RUNNER_CONFIG)
    │   ├── InvalidMiddlewareConfigError   (E_INVALID_MIDDLEWARE_CONFIG, also ValueError)
    │   ├── InvalidGateError               (E_INVALID_INITIAL_TURN_GATE_VALUE)
    │   ├── InvalidMediaError              (E_INVALID_INITIAL_MEDIA_VALUE)
    │   ├── MissingExtraError              (E_MISSING_EXTRA, also ImportError; .extra)
    │   ├── NotASpoolReaderError           (E_NOT_A_SPOOL_READER, also TypeError)
    │   └── ToolAlreadyRegisteredError     (E_TOOL_ALREADY_REGISTERED)
    ├── ToolError                          (E_TOOL_ERROR; .tool_name, .call_id)
    │   ├── InvalidToolArgsError           (E_INVALID_TOOL_ARGS, also ValueError)
    │   ├── ToolNotFoundError              (E_TOOL_NOT_FOUND, also LookupError)
    │   │   └── ToolUnavailableError       (E_TOOL_UNAVAILABLE; .policy, .reason)
    │   ├── CallDeniedError                (E_CALL_DENIED; .policy, .reason)
    │   │   └── CallRejectedError          (E_CALL_REJECTED)
    │   ├── ArgumentsLockedError           (E_ARGS_LOCKED)
    │   └── ToolDownstreamError            (E_TOOL_DOWNSTREAM_ERROR)
    ├── PipelineError                      (E_PIPELINE_ERROR; .stage, .middleware)
    │   ├── InputPipelineError             (E_INPUT_PIPELINE_ERROR)
    │   ├── DispatchPipelineError          (E_DISPATCH_PIPELINE_ERROR)
    │   ├── OutputPipelineError            (E_OUTPUT_PIPELINE_ERROR)
    │   ├── PipelineShortCircuitedError    (E_PIPELINE_SHORT_CIRCUITED)
    │   └── NextCalledTwiceError           (E_NEXT_CALLED_TWICE)
    ├── ModelError                         (E_MODEL_ERROR; .provider, .model, .status_code)
    │   ├── ModelRateLimitedError          (E_MODEL_RATE_LIMITED)
    │   ├── ModelAuthenticationError       (E_MODEL_AUTHENTICATION)
    │   ├── ModelBadRequestError           (E_MODEL_BAD_REQUEST)
    │   │   └── ModelContextLengthError    (E_MODEL_CONTEXT_LENGTH)
    │   ├── ModelUnavailableError          (E_MODEL_UNAVAILABLE)
    │   ├── ModelTimeoutError              (E_MODEL_TIMEOUT, also TimeoutError)
    │   └── ModelRefusalError              (E_MODEL_REFUSAL)
    ├── GateError                          (E_GATE_ERROR; .gate_id)
    │   ├── GateTimeoutError               (E_TURN_GATE_TIMEOUT, also TimeoutError)
    │   ├── GateAbortedError               (E_TURN_GATE_ABORTED)
    │   └── InvalidGateResolutionError     (E_INVALID_TURN_GATE_RESOLUTION)
    ├── AlreadySignalledError              (E_LLM_EXECUTION_ALREADY_SIGNALLED)
    ├── NackedError                        (E_NACKED)
    ├── ExecutorError                      (E_LLM_EXECUTION_EXECUTOR_ERROR)
    ├── IterationLimitError                (E_ITERATION_LIMIT)
    ├── TurnAbortedError                   (E_TURN_ABORTED)
    ├── PolicyViolationError               (E_POLICY_VIOLATION)
    └── StoreError                         (E_STORE_ERROR)

The families are bases to catch; loopware never raises one directly. Each class names its context
as typed keyword-only constructor parameters (absent context is ``None``, an empty list or an
empty dict), so ``except ToolNotFoundError as err: err.tool_name`` type-checks. Other keywords
are still accepted and become attributes, as `LoopError`'s are. `str(err)` is
``"CODE: message"``. Causes are chained with ``raise ... from exc``.
"""

from __future__ import annotations

from ._config import ConfigurationError as ConfigurationError
from ._config import InvalidGateError as InvalidGateError
from ._config import InvalidMediaError as InvalidMediaError
from ._config import InvalidMiddlewareConfigError as InvalidMiddlewareConfigError
from ._config import InvalidRunnerConfigError as InvalidRunnerConfigError
from ._config import InvalidStashValueError as InvalidStashValueError
from ._config import InvalidToolCallError as InvalidToolCallError
from ._config import InvalidToolError as InvalidToolError
from ._config import MissingExtraError as MissingExtraError
from ._config import NotASpoolReaderError as NotASpoolReaderError
from ._config import ToolAlreadyRegisteredError as ToolAlreadyRegisteredError
from ._flow import AlreadySignalledError as AlreadySignalledError
from ._flow import ExecutorError as ExecutorError
from ._flow import IterationLimitError as IterationLimitError
from ._flow import NackedError as NackedError
from ._flow import PolicyViolationError as PolicyViolationError
from ._flow import StoreError as StoreError
from ._flow import TurnAbortedError as TurnAbortedError
from ._gate import GateAbortedError as GateAbortedError
from ._gate import GateError as GateError
from ._gate import GateTimeoutError as GateTimeoutError
from ._gate import InvalidGateResolutionError as InvalidGateResolutionError
from ._model import ModelAuthenticationError as ModelAuthenticationError
from ._model import ModelBadRequestError as ModelBadRequestError
from ._model import ModelContextLengthError as ModelContextLengthError
from ._model import ModelError as ModelError
from ._model import ModelRateLimitedError as ModelRateLimitedError
from ._model import ModelRefusalError as ModelRefusalError
from ._model import ModelTimeoutError as ModelTimeoutError
from ._model import ModelUnavailableError as ModelUnavailableError
from ._pipeline import DispatchPipelineError as DispatchPipelineError
from ._pipeline import InputPipelineError as InputPipelineError
from ._pipeline import NextCalledTwiceError as NextCalledTwiceError
from ._pipeline import OutputPipelineError as OutputPipelineError
from ._pipeline import PipelineError as PipelineError
from ._pipeline import PipelineShortCircuitedError as PipelineShortCircuitedError
from ._root import LoopError as LoopError
from ._tool import ArgumentsLockedError as ArgumentsLockedError
from ._tool import CallDeniedError as CallDeniedError
from ._tool import CallRejectedError as CallRejectedError
from ._tool import InvalidToolArgsError as InvalidToolArgsError
from ._tool import ToolDownstreamError as ToolDownstreamError
from ._tool import ToolError as ToolError
from ._tool import ToolNotFoundError as ToolNotFoundError
from ._tool import ToolUnavailableError as ToolUnavailableError

__all__ = [
    "AlreadySignalledError",
    "ArgumentsLockedError",
    "CallDeniedError",
    "CallRejectedError",
    "ConfigurationError",
    "DispatchPipelineError",
    "ExecutorError",
    "GateAbortedError",
    "GateError",
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
    "MissingExtraError",
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelContextLengthError",
    "ModelError",
    "ModelRateLimitedError",
    "ModelRefusalError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "NackedError",
    "NextCalledTwiceError",
    "NotASpoolReaderError",
    "OutputPipelineError",
    "PipelineError",
    "PipelineShortCircuitedError",
    "PolicyViolationError",
    "StoreError",
    "ToolAlreadyRegisteredError",
    "ToolDownstreamError",
    "ToolError",
    "ToolNotFoundError",
    "ToolUnavailableError",
    "TurnAbortedError",
]


def _publish() -> None:
    for name in __all__:
        globals()[name].__module__ = "pipeline.errors"


_publish()
