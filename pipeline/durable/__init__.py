"""Durable and distributed turns on DBOS (the ``durable`` extra; ``dbos`` loads only when used).

`DurableTurnRunner` runs each turn as a DBOS workflow on a queue: every model call and tool
handler is a checkpointed step, gate waits are durable messages, and a turn a crashed worker
left behind finishes on another. `DurableClient` queues turns and settles gates from any
process. See docs/guides/durable.md.
"""

from ._client import DurableClient as DurableClient
from ._client import WaitingGate as WaitingGate
from ._errors import DurableConfigError as DurableConfigError
from ._errors import GateNotWaitingError as GateNotWaitingError
from ._errors import RecordedToolError as RecordedToolError
from ._errors import ReplayDivergedError as ReplayDivergedError
from ._errors import ToolInterruptedError as ToolInterruptedError
from ._outcome import DurableTurnOutcome as DurableTurnOutcome
from ._runner import DEFAULT_QUEUE as DEFAULT_QUEUE
from ._runner import DEFAULT_SYSTEM_DATABASE as DEFAULT_SYSTEM_DATABASE
from ._runner import DurableTurnRunner as DurableTurnRunner
from ._steps import DurableModel as DurableModel
from ._steps import DurableStore as DurableStore
from ._steps import durable_tool as durable_tool

__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_SYSTEM_DATABASE",
    "DurableClient",
    "DurableConfigError",
    "DurableModel",
    "DurableStore",
    "DurableTurnOutcome",
    "DurableTurnRunner",
    "GateNotWaitingError",
    "RecordedToolError",
    "ReplayDivergedError",
    "ToolInterruptedError",
    "WaitingGate",
    "durable_tool",
]
