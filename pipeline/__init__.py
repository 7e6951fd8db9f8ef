"""loopware's core: tools, registries, the stash, contexts, the turn runner and the model seam.

The top level holds what most programs use. The wings have public sub-packages of their own:
`pipeline.errors` (the `LoopError` tree), `pipeline.events` (what listeners receive),
`pipeline.stages` (the middleware contract), `pipeline.calls` (a tool call's run, record and
decisions), `pipeline.artifacts` (artifacts, media, trust
envelopes), `pipeline.stores` (persistence), `pipeline.models` (the model seam) and
`pipeline.testing` (test doubles). Every name those modules export is also importable from
``pipeline`` itself, as before they moved (``from pipeline import SqliteStore`` keeps working).

The provider models, the durable stores and the JSON and Markdown artifacts load when first
named, not on ``import pipeline`` (docs/architecture.md, "Import time").
"""

import typing as _typing

from . import artifacts as artifacts
from . import calls as calls
from . import errors as errors
from . import events as events
from . import models as models
from . import stages as stages
from . import stores as stores
from ._context import ContextLog as ContextLog
from ._context import TurnContext as TurnContext
from ._dispatch import DispatchContext as DispatchContext
from ._executor import ToolLoopExecutor as ToolLoopExecutor
from ._gate import Gate as Gate
from ._gate import GateResult as GateResult
from ._json import canonical_json as canonical_json
from ._json import tool_call_checksum as tool_call_checksum
from ._registry import ToolRegistry as ToolRegistry
from ._result import TurnResult as TurnResult
from ._runner import TurnHandle as TurnHandle
from ._runner import TurnRunner as TurnRunner
from ._stash import Stash as Stash
from ._stash import StashKey as StashKey
from ._stash_snapshot import StashSnapshot as StashSnapshot
from ._tool import Tool as Tool
from ._tool import ToolContext as ToolContext
from ._tool import ToolOutput as ToolOutput
from ._tool_checks import is_tool_name as is_tool_name
from ._tool_decorator import tool as tool

# Re-exported from the public sub-packages, so every old import path keeps working.
from .artifacts import ArtifactTool as ArtifactTool
from .artifacts import Media as Media
from .artifacts import MediaKind as MediaKind
from .artifacts import ModalityHazard as ModalityHazard
from .artifacts import RenderedResult as RenderedResult
from .artifacts import SpooledArtifact as SpooledArtifact
from .artifacts import ToolLookup as ToolLookup
from .artifacts import ToolMethod as ToolMethod
from .artifacts import TrustTier as TrustTier
from .artifacts import render_tool_result as render_tool_result
from .calls import Decision as Decision
from .calls import DecisionAction as DecisionAction
from .calls import DecisionWhen as DecisionWhen
from .calls import ToolCall as ToolCall
from .calls import ToolCallContext as ToolCallContext
from .calls import ToolCallNext as ToolCallNext
from .calls import ToolCallResults as ToolCallResults
from .calls import ToolDecision as ToolDecision
from .calls import ToolDecisionAction as ToolDecisionAction
from .calls import Verdict as Verdict
from .calls import verdict as verdict
from .errors import AlreadySignalledError as AlreadySignalledError
from .errors import ArgumentsLockedError as ArgumentsLockedError
from .errors import CallDeniedError as CallDeniedError
from .errors import CallRejectedError as CallRejectedError
from .errors import ConfigurationError as ConfigurationError
from .errors import DispatchPipelineError as DispatchPipelineError
from .errors import ExecutorError as ExecutorError
from .errors import GateAbortedError as GateAbortedError
from .errors import GateError as GateError
from .errors import GateTimeoutError as GateTimeoutError
from .errors import InputPipelineError as InputPipelineError
from .errors import InvalidGateError as InvalidGateError
from .errors import InvalidGateResolutionError as InvalidGateResolutionError
from .errors import InvalidMediaError as InvalidMediaError
from .errors import InvalidMiddlewareConfigError as InvalidMiddlewareConfigError
from .errors import InvalidRunnerConfigError as InvalidRunnerConfigError
from .errors import InvalidStashValueError as InvalidStashValueError
from .errors import InvalidToolArgsError as InvalidToolArgsError
from .errors import InvalidToolCallError as InvalidToolCallError
from .errors import InvalidToolError as InvalidToolError
from .errors import IterationLimitError as IterationLimitError
from .errors import LoopError as LoopError
from .errors import ModelAuthenticationError as ModelAuthenticationError
from .errors import ModelBadRequestError as ModelBadRequestError
from .errors import ModelContextLengthError as ModelContextLengthError
from .errors import ModelError as ModelError
from .errors import ModelRateLimitedError as ModelRateLimitedError
from .errors import ModelRefusalError as ModelRefusalError
from .errors import ModelTimeoutError as ModelTimeoutError
from .errors import ModelUnavailableError as ModelUnavailableError
from .errors import NackedError as NackedError
from .errors import NextCalledTwiceError as NextCalledTwiceError
from .errors import NotASpoolReaderError as NotASpoolReaderError
from .errors import OutputPipelineError as OutputPipelineError
from .errors import PipelineError as PipelineError
from .errors import PipelineShortCircuitedError as PipelineShortCircuitedError
from .errors import PolicyViolationError as PolicyViolationError
from .errors import StoreError as StoreError
from .errors import ToolAlreadyRegisteredError as ToolAlreadyRegisteredError
from .errors import ToolDownstreamError as ToolDownstreamError
from .errors import ToolError as ToolError
from .errors import ToolNotFoundError as ToolNotFoundError
from .errors import ToolUnavailableError as ToolUnavailableError
from .errors import TurnAbortedError as TurnAbortedError
from .events import DispatchEnd as DispatchEnd
from .events import DispatchStart as DispatchStart
from .events import ErrorReported as ErrorReported
from .events import Event as Event
from .events import GateClosed as GateClosed
from .events import GateOpened as GateOpened
from .events import IterationEnd as IterationEnd
from .events import IterationStart as IterationStart
from .events import Log as Log
from .events import LogLevel as LogLevel
from .events import MessageStored as MessageStored
from .events import ModelTextDelta as ModelTextDelta
from .events import StageName as StageName
from .events import ToolCallStored as ToolCallStored
from .events import ToolDecided as ToolDecided
from .events import ToolExecutionEnd as ToolExecutionEnd
from .events import ToolExecutionStart as ToolExecutionStart
from .events import TurnEnd as TurnEnd
from .events import TurnStart as TurnStart
from .events import TurnStatus as TurnStatus
from .models import ChatModel as ChatModel
from .models import HistoryView as HistoryView
from .models import Message as Message
from .models import ModelRequest as ModelRequest
from .models import ModelResponse as ModelResponse
from .models import ProposedToolCall as ProposedToolCall
from .models import Usage as Usage
from .models import infer_model as infer_model
from .models import to_anthropic_tools as to_anthropic_tools
from .models import to_gemini_tools as to_gemini_tools
from .models import to_openai_tools as to_openai_tools
from .models._tool_defs import ToolDescription as ToolDescription
from .stages import CallNext as CallNext
from .stages import DispatchStageFn as DispatchStageFn
from .stages import EventObserver as EventObserver
from .stages import EventSource as EventSource
from .stages import JointRecordKeeper as JointRecordKeeper
from .stages import MethodRegistration as MethodRegistration
from .stages import MiddlewareProvider as MiddlewareProvider
from .stages import MiddlewareSpec as MiddlewareSpec
from .stages import RecordAction as RecordAction
from .stages import RecordChange as RecordChange
from .stages import RecordKeeper as RecordKeeper
from .stages import Stage as Stage
from .stages import ToolCallStageFn as ToolCallStageFn
from .stages import TurnStageFn as TurnStageFn
from .stores import JointStore as JointStore
from .stores import MemorySpoolStore as MemorySpoolStore
from .stores import MemoryStore as MemoryStore
from .stores import SpoolReader as SpoolReader
from .stores import SpoolStore as SpoolStore
from .stores import TransactionWriter as TransactionWriter
from .stores import TurnRecord as TurnRecord
from .stores import TurnStore as TurnStore

if _typing.TYPE_CHECKING:
    from .artifacts import JsonFormat as JsonFormat
    from .artifacts import SpooledJsonArtifact as SpooledJsonArtifact
    from .artifacts import SpooledMarkdownArtifact as SpooledMarkdownArtifact
    from .models import AnthropicModel as AnthropicModel
    from .models import OpenAIChatModel as OpenAIChatModel
    from .models import OpenAIResponsesModel as OpenAIResponsesModel
    from .stores import FileSpoolStore as FileSpoolStore
    from .stores import PostgresStore as PostgresStore
    from .stores import SqliteStore as SqliteStore

_LAZY = {
    "AnthropicModel": models,
    "FileSpoolStore": stores,
    "JsonFormat": artifacts,
    "OpenAIChatModel": models,
    "OpenAIResponsesModel": models,
    "PostgresStore": stores,
    "SpooledJsonArtifact": artifacts,
    "SpooledMarkdownArtifact": artifacts,
    "SqliteStore": stores,
}
"""Names the sub-packages load on first use, and the sub-package that holds each."""


def __getattr__(name: str) -> _typing.Any:
    """Load a provider model, durable store or artifact class when its name is first asked for."""
    package = _LAZY.get(name)
    if package is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(package, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, those loaded on first use included."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CallNext",
    "ChatModel",
    "ConfigurationError",
    "ContextLog",
    "Decision",
    "DispatchContext",
    "Event",
    "FileSpoolStore",
    "Gate",
    "GateError",
    "GateResult",
    "InvalidToolArgsError",
    "LoopError",
    "Media",
    "MemorySpoolStore",
    "MemoryStore",
    "Message",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "PipelineError",
    "PolicyViolationError",
    "ProposedToolCall",
    "RenderedResult",
    "SpoolStore",
    "SpooledArtifact",
    "SqliteStore",
    "Stage",
    "Stash",
    "StashKey",
    "StashSnapshot",
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolCallNext",
    "ToolContext",
    "ToolDecision",
    "ToolDescription",
    "ToolError",
    "ToolLoopExecutor",
    "ToolNotFoundError",
    "ToolOutput",
    "ToolRegistry",
    "TurnAbortedError",
    "TurnContext",
    "TurnHandle",
    "TurnResult",
    "TurnRunner",
    "TurnStatus",
    "TurnStore",
    "Usage",
    "canonical_json",
    "is_tool_name",
    "render_tool_result",
    "tool",
    "tool_call_checksum",
]
