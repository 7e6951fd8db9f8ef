"""loopware middleware: decorator registration and the built-in policy middleware.

``import middleware`` loads the registration decorators, the stage protocols and `Middleware`.
The built-in middleware load on first use of one of their names (docs/architecture.md, "Import
time"): every name in ``__all__`` is importable from here and listed by ``dir()``. The audit
wing and the replay engine are public sub-packages with names of their own, imported from there:
`middleware.audit` (`AuditLog` and its sinks) and `middleware.transcripts` (`replay`,
`read_transcript`).
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
    from ._context_window import ContextWindow as ContextWindow
    from ._counter import ToolCallCounter as ToolCallCounter
    from ._limit import LimitCount as LimitCount
    from ._limit import OnExceed as OnExceed
    from ._limit import ToolCallLimit as ToolCallLimit
    from ._model_limit import ModelCallLimit as ModelCallLimit
    from ._policy import ToolPolicy as ToolPolicy
    from ._repetition import OnRepeat as OnRepeat
    from ._repetition import RepetitionDetector as RepetitionDetector
    from ._scope import Clock as Clock
    from ._scope import Scope as Scope
    from ._token_budget import TokenBudget as TokenBudget
    from ._tracing import Tracing as Tracing

_LAZY = {
    "ApprovalGate": "_approval",
    "Approver": "_approval",
    "ContextWindow": "_context_window",
    "IterationBudget": "_budget",
    "LimitCount": "_limit",
    "ModelCallLimit": "_model_limit",
    "OnExceed": "_limit",
    "OnRepeat": "_repetition",
    "RepetitionDetector": "_repetition",
    "Clock": "_scope",
    "Scope": "_scope",
    "TokenBudget": "_token_budget",
    "ToolCallCounter": "_counter",
    "ToolCallLimit": "_limit",
    "ToolPolicy": "_policy",
    "Tracing": "_tracing",
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
    if module == "_context_window":
        from . import _context_window

        return _context_window
    if module == "_counter":
        from . import _counter

        return _counter
    if module == "_limit":
        from . import _limit

        return _limit
    if module == "_model_limit":
        from . import _model_limit

        return _model_limit
    if module == "_policy":
        from . import _policy

        return _policy
    if module == "_repetition":
        from . import _repetition

        return _repetition
    if module == "_scope":
        from . import _scope

        return _scope
    if module == "_token_budget":
        from . import _token_budget

        return _token_budget
    from . import _tracing

    return _tracing


def __getattr__(name: str) -> _typing.Any:
    """Load the module behind a built-in middleware's name on first use."""
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
    "Clock",
    "ContextWindow",
    "DispatchHook",
    "DispatchHookMethod",
    "DispatchMiddleware",
    "DispatchMiddlewareMethod",
    "IterationBudget",
    "LimitCount",
    "Middleware",
    "ModelCallLimit",
    "OnExceed",
    "OnRepeat",
    "RepetitionDetector",
    "Scope",
    "TokenBudget",
    "ToolCallCounter",
    "ToolCallHook",
    "ToolCallHookMethod",
    "ToolCallLimit",
    "ToolCallMiddleware",
    "ToolCallMiddlewareMethod",
    "ToolPolicy",
    "Tracing",
    "TurnHook",
    "TurnHookMethod",
    "TurnMiddleware",
    "TurnMiddlewareMethod",
    "dispatch_input",
    "dispatch_output",
    "tool_call",
    "turn_input",
    "turn_output",
]
