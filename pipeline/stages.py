"""The middleware contract between `pipeline` and the `middleware` package.

A middleware is ``async (ctx, call_next) -> None``; items handed to
``TurnRunner(middleware=[...])`` resolve to `MiddlewareSpec` values through
`MiddlewareProvider` or `MethodRegistration`, may observe events as `EventObserver`, and may
keep a record of every change to a turn's stored calls as `RecordKeeper` (in the store's own
transaction as `JointRecordKeeper`).
"""

from ._record_keepers import JointRecordKeeper as JointRecordKeeper
from ._record_keepers import RecordAction as RecordAction
from ._record_keepers import RecordChange as RecordChange
from ._record_keepers import RecordKeeper as RecordKeeper
from ._stages import CallNext as CallNext
from ._stages import DispatchStageFn as DispatchStageFn
from ._stages import EventObserver as EventObserver
from ._stages import EventSource as EventSource
from ._stages import MethodRegistration as MethodRegistration
from ._stages import MiddlewareProvider as MiddlewareProvider
from ._stages import MiddlewareSpec as MiddlewareSpec
from ._stages import Stage as Stage
from ._stages import ToolCallStageFn as ToolCallStageFn
from ._stages import TurnStageFn as TurnStageFn

__all__ = [
    "CallNext",
    "DispatchStageFn",
    "EventObserver",
    "EventSource",
    "JointRecordKeeper",
    "MethodRegistration",
    "MiddlewareProvider",
    "MiddlewareSpec",
    "RecordAction",
    "RecordChange",
    "RecordKeeper",
    "Stage",
    "ToolCallStageFn",
    "TurnStageFn",
]
