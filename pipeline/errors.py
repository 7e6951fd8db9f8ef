"""The `LoopError` tree: every error loopware raises, with its stable `E_...` code.

The tree is drawn in the docstring of `LoopError`'s module (``pipeline._errors``); each class
is also importable from ``pipeline``. Four families group the errors a caller handles alike:
`ConfigurationError` (bad configuration or construction), `ToolError` (a tool call failed),
`PipelineError` (a middleware stage failed) and `GateError` (an approval gate failed).
"""

from ._errors import AlreadySignalledError as AlreadySignalledError
from ._errors import ArgumentsLockedError as ArgumentsLockedError
from ._errors import CallDeniedError as CallDeniedError
from ._errors import CallRejectedError as CallRejectedError
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DispatchPipelineError as DispatchPipelineError
from ._errors import ExecutorError as ExecutorError
from ._errors import GateAbortedError as GateAbortedError
from ._errors import GateError as GateError
from ._errors import GateTimeoutError as GateTimeoutError
from ._errors import InputPipelineError as InputPipelineError
from ._errors import InvalidGateError as InvalidGateError
from ._errors import InvalidGateResolutionError as InvalidGateResolutionError
from ._errors import InvalidMediaError as InvalidMediaError
from ._errors import InvalidMiddlewareConfigError as InvalidMiddlewareConfigError
from ._errors import InvalidRunnerConfigError as InvalidRunnerConfigError
from ._errors import InvalidStashValueError as InvalidStashValueError
from ._errors import InvalidToolArgsError as InvalidToolArgsError
from ._errors import InvalidToolCallError as InvalidToolCallError
from ._errors import InvalidToolError as InvalidToolError
from ._errors import IterationLimitError as IterationLimitError
from ._errors import LoopError as LoopError
from ._errors import ModelAuthenticationError as ModelAuthenticationError
from ._errors import ModelBadRequestError as ModelBadRequestError
from ._errors import ModelContextLengthError as ModelContextLengthError
from ._errors import ModelError as ModelError
from ._errors import ModelRateLimitedError as ModelRateLimitedError
from ._errors import ModelRefusalError as ModelRefusalError
from ._errors import ModelTimeoutError as ModelTimeoutError
from ._errors import ModelUnavailableError as ModelUnavailableError
from ._errors import NackedError as NackedError
from ._errors import NextCalledTwiceError as NextCalledTwiceError
from ._errors import NotASpoolReaderError as NotASpoolReaderError
from ._errors import OutputPipelineError as OutputPipelineError
from ._errors import PipelineError as PipelineError
from ._errors import PipelineShortCircuitedError as PipelineShortCircuitedError
from ._errors import PolicyViolationError as PolicyViolationError
from ._errors import StoreError as StoreError
from ._errors import ToolAlreadyRegisteredError as ToolAlreadyRegisteredError
from ._errors import ToolDownstreamError as ToolDownstreamError
from ._errors import ToolError as ToolError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._errors import ToolUnavailableError as ToolUnavailableError
from ._errors import TurnAbortedError as TurnAbortedError

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
