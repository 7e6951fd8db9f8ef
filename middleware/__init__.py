"""loopware middleware: decorator registration and the built-in policy middleware."""

from ._budget import IterationBudget as IterationBudget
from ._counter import ToolCallCounter as ToolCallCounter
from ._limit import ToolCallLimit as ToolCallLimit
from ._policy import ToolPolicy as ToolPolicy
from ._protocols import DispatchHook as DispatchHook
from ._protocols import DispatchHookMethod as DispatchHookMethod
from ._protocols import DispatchMiddleware as DispatchMiddleware
from ._protocols import DispatchMiddlewareMethod as DispatchMiddlewareMethod
from ._protocols import TurnHook as TurnHook
from ._protocols import TurnHookMethod as TurnHookMethod
from ._protocols import TurnMiddleware as TurnMiddleware
from ._protocols import TurnMiddlewareMethod as TurnMiddlewareMethod
from ._registration import dispatch_input as dispatch_input
from ._registration import dispatch_output as dispatch_output
from ._registration import turn_input as turn_input
from ._registration import turn_output as turn_output
from ._repetition import RepetitionDetector as RepetitionDetector
from ._set import Middleware as Middleware

__all__ = [
    "DispatchHook",
    "DispatchHookMethod",
    "DispatchMiddleware",
    "DispatchMiddlewareMethod",
    "IterationBudget",
    "Middleware",
    "RepetitionDetector",
    "ToolCallCounter",
    "ToolCallLimit",
    "ToolPolicy",
    "TurnHook",
    "TurnHookMethod",
    "TurnMiddleware",
    "TurnMiddlewareMethod",
    "dispatch_input",
    "dispatch_output",
    "turn_input",
    "turn_output",
]
