"""The events a runner emits: subscribe with ``runner.on(EventType, handler)``.

Every event is a frozen dataclass with ``turn_id`` and ``timestamp``; import the classes from
here (no other module exports them). docs/reference/events.md lists them with their fields.
"""

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
from ._events import ModelTextDelta as ModelTextDelta
from ._events import StageName as StageName
from ._events import ToolCallStored as ToolCallStored
from ._events import ToolDecided as ToolDecided
from ._events import ToolExecutionEnd as ToolExecutionEnd
from ._events import ToolExecutionStart as ToolExecutionStart
from ._events import TurnEnd as TurnEnd
from ._events import TurnStart as TurnStart
from ._events import TurnStatus as TurnStatus

__all__ = [
    "DispatchEnd",
    "DispatchStart",
    "ErrorReported",
    "Event",
    "GateClosed",
    "GateOpened",
    "IterationEnd",
    "IterationStart",
    "Log",
    "LogLevel",
    "MessageStored",
    "ModelTextDelta",
    "StageName",
    "ToolCallStored",
    "ToolDecided",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "TurnEnd",
    "TurnStart",
    "TurnStatus",
]
