"""loopware's core: tools, registries, the stash, contexts, the turn runner and the model seam."""

from ._artifact import SpooledArtifact as SpooledArtifact
from ._context import ContextLog as ContextLog
from ._context import TurnContext as TurnContext
from ._dispatch import DispatchContext as DispatchContext
from ._errors import AlreadySignalledError as AlreadySignalledError
from ._errors import DispatchPipelineError as DispatchPipelineError
from ._errors import ExecutorError as ExecutorError
from ._errors import GateAbortedError as GateAbortedError
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
from ._errors import NackedError as NackedError
from ._errors import NextCalledTwiceError as NextCalledTwiceError
from ._errors import NotASpoolReaderError as NotASpoolReaderError
from ._errors import OutputPipelineError as OutputPipelineError
from ._errors import PipelineShortCircuitedError as PipelineShortCircuitedError
from ._errors import PolicyViolationError as PolicyViolationError
from ._errors import StoreError as StoreError
from ._errors import ToolAlreadyRegisteredError as ToolAlreadyRegisteredError
from ._errors import ToolDownstreamError as ToolDownstreamError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._errors import TurnAbortedError as TurnAbortedError
from ._events import DispatchEnd as DispatchEnd
from ._events import DispatchStart as DispatchStart
from ._events import ErrorReported as ErrorReported
from ._events import Event as Event
from ._events import GateClosed as GateClosed
from ._events import GateOpened as GateOpened
from ._events import IterationEnd as IterationEnd
from ._events import IterationStart as IterationStart
from ._events import Log as Log
from ._events import LogLevel as LogLevel
from ._events import MessageStored as MessageStored
from ._events import StageName as StageName
from ._events import ToolCallStored as ToolCallStored
from ._events import ToolExecutionEnd as ToolExecutionEnd
from ._events import ToolExecutionStart as ToolExecutionStart
from ._events import TurnEnd as TurnEnd
from ._events import TurnStart as TurnStart
from ._events import TurnStatus as TurnStatus
from ._executor import ToolLoopExecutor as ToolLoopExecutor
from ._file_spool import FileSpoolStore as FileSpoolStore
from ._forge import ArtifactTool as ArtifactTool
from ._gate import Gate as Gate
from ._gate import GateResult as GateResult
from ._json import canonical_json as canonical_json
from ._json import tool_call_checksum as tool_call_checksum
from ._json_artifact import JsonFormat as JsonFormat
from ._json_artifact import SpooledJsonArtifact as SpooledJsonArtifact
from ._md_artifact import SpooledMarkdownArtifact as SpooledMarkdownArtifact
from ._media import Media as Media
from ._media import MediaKind as MediaKind
from ._media import ModalityHazard as ModalityHazard
from ._media import TrustTier as TrustTier
from ._model import ChatModel as ChatModel
from ._model import Message as Message
from ._model import ModelRequest as ModelRequest
from ._model import ModelResponse as ModelResponse
from ._model import ProposedToolCall as ProposedToolCall
from ._registry import ToolRegistry as ToolRegistry
from ._render import RenderedResult as RenderedResult
from ._render import render_tool_result as render_tool_result
from ._renderers import to_anthropic_tools as to_anthropic_tools
from ._renderers import to_gemini_tools as to_gemini_tools
from ._renderers import to_openai_tools as to_openai_tools
from ._result import TurnResult as TurnResult
from ._runner import TurnHandle as TurnHandle
from ._runner import TurnRunner as TurnRunner
from ._spool import MemorySpoolStore as MemorySpoolStore
from ._spool import SpoolReader as SpoolReader
from ._spool import SpoolStore as SpoolStore
from ._sqlite_store import SqliteStore as SqliteStore
from ._stages import CallNext as CallNext
from ._stages import DispatchStageFn as DispatchStageFn
from ._stages import EventObserver as EventObserver
from ._stages import EventSource as EventSource
from ._stages import MethodRegistration as MethodRegistration
from ._stages import MiddlewareProvider as MiddlewareProvider
from ._stages import MiddlewareSpec as MiddlewareSpec
from ._stages import Stage as Stage
from ._stages import TurnStageFn as TurnStageFn
from ._stash import Stash as Stash
from ._stash import StashKey as StashKey
from ._store import MemoryStore as MemoryStore
from ._store import TurnRecord as TurnRecord
from ._store import TurnStore as TurnStore
from ._tool import Tool as Tool
from ._tool import ToolContext as ToolContext
from ._tool import ToolDescription as ToolDescription
from ._tool import ToolGuard as ToolGuard
from ._tool import ToolOutput as ToolOutput
from ._tool_decorator import tool as tool
from ._toolcall import ToolCall as ToolCall
from ._toolmethod import ToolMethod as ToolMethod

__all__ = [
    "AlreadySignalledError",
    "ArtifactTool",
    "CallNext",
    "ChatModel",
    "ContextLog",
    "DispatchContext",
    "DispatchEnd",
    "DispatchPipelineError",
    "DispatchStageFn",
    "DispatchStart",
    "ErrorReported",
    "Event",
    "EventObserver",
    "EventSource",
    "ExecutorError",
    "FileSpoolStore",
    "Gate",
    "GateAbortedError",
    "GateClosed",
    "GateOpened",
    "GateResult",
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
    "IterationEnd",
    "IterationLimitError",
    "IterationStart",
    "JsonFormat",
    "Log",
    "LogLevel",
    "LoopError",
    "Media",
    "MediaKind",
    "MemorySpoolStore",
    "MemoryStore",
    "Message",
    "MessageStored",
    "MethodRegistration",
    "MiddlewareProvider",
    "MiddlewareSpec",
    "ModalityHazard",
    "ModelRequest",
    "ModelResponse",
    "NackedError",
    "NextCalledTwiceError",
    "NotASpoolReaderError",
    "OutputPipelineError",
    "PipelineShortCircuitedError",
    "PolicyViolationError",
    "ProposedToolCall",
    "RenderedResult",
    "SpoolReader",
    "SpoolStore",
    "SpooledArtifact",
    "SpooledJsonArtifact",
    "SpooledMarkdownArtifact",
    "SqliteStore",
    "Stage",
    "StageName",
    "Stash",
    "StashKey",
    "StoreError",
    "Tool",
    "ToolAlreadyRegisteredError",
    "ToolCall",
    "ToolCallStored",
    "ToolContext",
    "ToolDescription",
    "ToolDownstreamError",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolGuard",
    "ToolLoopExecutor",
    "ToolMethod",
    "ToolNotFoundError",
    "ToolOutput",
    "ToolRegistry",
    "TrustTier",
    "TurnAbortedError",
    "TurnContext",
    "TurnEnd",
    "TurnHandle",
    "TurnRecord",
    "TurnResult",
    "TurnRunner",
    "TurnStageFn",
    "TurnStart",
    "TurnStatus",
    "TurnStore",
    "canonical_json",
    "render_tool_result",
    "to_anthropic_tools",
    "to_gemini_tools",
    "to_openai_tools",
    "tool",
    "tool_call_checksum",
]
