"""loopware middleware: decorator registration, the built-in policy middleware, and replay.

The audit wing (`middleware.audit`) and the replay engine (`middleware.transcripts`) load on
first use of one of their names, not on ``import middleware`` (docs/architecture.md, "Import
time").
"""

import types as _types
import typing as _typing

from ._approval import ApprovalGate as ApprovalGate
from ._approval import Approver as Approver
from ._budget import IterationBudget as IterationBudget
from ._counter import ToolCallCounter as ToolCallCounter
from ._limit import OnExceed as OnExceed
from ._limit import ToolCallLimit as ToolCallLimit
from ._policy import ToolPolicy as ToolPolicy
from ._protocols import DispatchHook as DispatchHook
from ._protocols import DispatchHookMethod as DispatchHookMethod
from ._protocols import DispatchMiddleware as DispatchMiddleware
from ._protocols import DispatchMiddlewareMethod as DispatchMiddlewareMethod
from ._protocols import ToolCallHook as ToolCallHook
from ._protocols import ToolCallHookMethod as ToolCallHookMethod
from ._protocols import ToolCallMiddleware as ToolCallMiddleware
from ._protocols import ToolCallMiddlewareMethod as ToolCallMiddlewareMethod
from ._protocols import TurnHook as TurnHook
from ._protocols import TurnHookMethod as TurnHookMethod
from ._protocols import TurnMiddleware as TurnMiddleware
from ._protocols import TurnMiddlewareMethod as TurnMiddlewareMethod
from ._registration import dispatch_input as dispatch_input
from ._registration import dispatch_output as dispatch_output
from ._registration import tool_call as tool_call
from ._registration import turn_input as turn_input
from ._registration import turn_output as turn_output
from ._repetition import OnRepeat as OnRepeat
from ._repetition import RepetitionDetector as RepetitionDetector
from ._set import Middleware as Middleware
from ._token_budget import TokenBudget as TokenBudget
from ._tracing import Tracing as Tracing

if _typing.TYPE_CHECKING:
    from .audit import AuditDecision as AuditDecision
    from .audit import AuditEntry as AuditEntry
    from .audit import AuditHead as AuditHead
    from .audit import AuditLog as AuditLog
    from .audit import AuditRow as AuditRow
    from .audit import AuditSink as AuditSink
    from .audit import JsonlAuditSink as JsonlAuditSink
    from .audit import PostgresAuditSink as PostgresAuditSink
    from .audit import SqliteAuditSink as SqliteAuditSink
    from .transcripts import ReplayReport as ReplayReport
    from .transcripts import Transcript as Transcript
    from .transcripts import read_transcript as read_transcript
    from .transcripts import replay as replay
    from .transcripts import replay_async as replay_async

_AUDIT = frozenset({
    "AuditDecision",
    "AuditEntry",
    "AuditHead",
    "AuditLog",
    "AuditRow",
    "AuditSink",
    "JsonlAuditSink",
    "PostgresAuditSink",
    "SqliteAuditSink",
})
"""The audit wing's names: `middleware.audit` loads on first use, not on import."""
_REPLAY = frozenset({"ReplayReport", "Transcript", "read_transcript", "replay", "replay_async"})
"""The replay engine's names: `middleware.transcripts` loads on first use, not on import."""


def __getattr__(name: str) -> _typing.Any:
    """Load the audit wing or the replay engine when one of its names is first asked for."""
    package: _types.ModuleType
    if name in _AUDIT:
        from . import audit

        package = audit
    elif name in _REPLAY:
        from . import transcripts

        package = transcripts
    else:
        raise AttributeError(f"module 'middleware' has no attribute {name!r}")
    value = getattr(package, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, those loaded on first use included."""
    return sorted({*globals(), *_AUDIT, *_REPLAY})


__all__ = [
    "ApprovalGate",
    "Approver",
    "AuditDecision",
    "AuditEntry",
    "AuditHead",
    "AuditLog",
    "AuditRow",
    "AuditSink",
    "DispatchHook",
    "DispatchHookMethod",
    "DispatchMiddleware",
    "DispatchMiddlewareMethod",
    "IterationBudget",
    "JsonlAuditSink",
    "Middleware",
    "OnExceed",
    "OnRepeat",
    "PostgresAuditSink",
    "RepetitionDetector",
    "ReplayReport",
    "SqliteAuditSink",
    "TokenBudget",
    "ToolCallCounter",
    "ToolCallHook",
    "ToolCallHookMethod",
    "ToolCallLimit",
    "ToolCallMiddleware",
    "ToolCallMiddlewareMethod",
    "ToolPolicy",
    "Tracing",
    "Transcript",
    "TurnHook",
    "TurnHookMethod",
    "TurnMiddleware",
    "TurnMiddlewareMethod",
    "dispatch_input",
    "dispatch_output",
    "read_transcript",
    "replay",
    "replay_async",
    "tool_call",
    "turn_input",
    "turn_output",
]
