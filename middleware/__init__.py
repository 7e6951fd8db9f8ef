"""loopware middleware: decorator registration, the built-in policy middleware, and replay.

``import middleware`` loads the registration decorators, the stage protocols and `Middleware`.
The built-in middleware, the audit wing (`middleware.audit`) and the replay engine
(`middleware.transcripts`) load on first use of one of their names (docs/architecture.md,
"Import time"): every name in ``__all__`` is importable from here and listed by ``dir()``.
"""

import importlib as _importlib
import types as _types
import typing as _typing

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
from ._set import Middleware as Middleware

if _typing.TYPE_CHECKING:
    from ._approval import ApprovalGate as ApprovalGate
    from ._approval import Approver as Approver
    from ._budget import IterationBudget as IterationBudget
    from ._counter import ToolCallCounter as ToolCallCounter
    from ._limit import LimitCount as LimitCount
    from ._limit import OnExceed as OnExceed
    from ._limit import ToolCallLimit as ToolCallLimit
    from ._policy import ToolPolicy as ToolPolicy
    from ._repetition import OnRepeat as OnRepeat
    from ._repetition import RepetitionDetector as RepetitionDetector
    from ._token_budget import TokenBudget as TokenBudget
    from ._tracing import Tracing as Tracing
    from .audit import AuditAnchor as AuditAnchor
    from .audit import AuditAnchorFile as AuditAnchorFile
    from .audit import AuditDecision as AuditDecision
    from .audit import AuditEntry as AuditEntry
    from .audit import AuditHead as AuditHead
    from .audit import AuditKey as AuditKey
    from .audit import AuditKeyError as AuditKeyError
    from .audit import AuditKeyMismatchError as AuditKeyMismatchError
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

_LAZY = {
    "ApprovalGate": "_approval",
    "Approver": "_approval",
    "AuditAnchor": "audit",
    "AuditAnchorFile": "audit",
    "AuditDecision": "audit",
    "AuditEntry": "audit",
    "AuditHead": "audit",
    "AuditKey": "audit",
    "AuditKeyError": "audit",
    "AuditKeyMismatchError": "audit",
    "AuditLog": "audit",
    "AuditRow": "audit",
    "AuditSink": "audit",
    "IterationBudget": "_budget",
    "JsonlAuditSink": "audit",
    "LimitCount": "_limit",
    "OnExceed": "_limit",
    "OnRepeat": "_repetition",
    "PostgresAuditSink": "audit",
    "ReplayReport": "transcripts",
    "RepetitionDetector": "_repetition",
    "SqliteAuditSink": "audit",
    "TokenBudget": "_token_budget",
    "ToolCallCounter": "_counter",
    "ToolCallLimit": "_limit",
    "ToolPolicy": "_policy",
    "Tracing": "_tracing",
    "Transcript": "transcripts",
    "read_transcript": "transcripts",
    "replay": "transcripts",
    "replay_async": "transcripts",
}
"""Names loaded on first use, and the module that defines (or exports) each."""
_SUBPACKAGES = frozenset({"audit", "transcripts"})
"""The public sub-packages, also reachable as attributes (``middleware.audit.AuditLog``)."""


def _load(module: str) -> _types.ModuleType:
    """Import one of the modules in ``_LAZY`` (each import written out, for the import checks)."""
    if module == "_approval":
        from . import _approval

        return _approval
    if module == "_budget":
        from . import _budget

        return _budget
    if module == "_counter":
        from . import _counter

        return _counter
    if module == "_limit":
        from . import _limit

        return _limit
    if module == "_policy":
        from . import _policy

        return _policy
    if module == "_repetition":
        from . import _repetition

        return _repetition
    if module == "_token_budget":
        from . import _token_budget

        return _token_budget
    if module == "_tracing":
        from . import _tracing

        return _tracing
    if module == "audit":
        from . import audit

        return audit
    from . import transcripts

    return transcripts


def __getattr__(name: str) -> _typing.Any:
    """Load the module behind a built-in middleware, audit or replay name on first use."""
    if name in _SUBPACKAGES:
        # Not ``from . import``: that asks this hook for the name first, and would recurse.
        return _importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'middleware' has no attribute {name!r}")
    value = getattr(_load(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, those loaded on first use included."""
    return sorted({*globals(), *_LAZY, *_SUBPACKAGES})


__all__ = [
    "ApprovalGate",
    "Approver",
    "AuditAnchor",
    "AuditAnchorFile",
    "AuditDecision",
    "AuditEntry",
    "AuditHead",
    "AuditKey",
    "AuditKeyError",
    "AuditKeyMismatchError",
    "AuditLog",
    "AuditRow",
    "AuditSink",
    "DispatchHook",
    "DispatchHookMethod",
    "DispatchMiddleware",
    "DispatchMiddlewareMethod",
    "IterationBudget",
    "JsonlAuditSink",
    "LimitCount",
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
