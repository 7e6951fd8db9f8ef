"""A tool call's home: its run, its record and the decisions taken about it.

`ToolCallContext` is one proposed call's run (parse, look up, validate, the ``tool_call``
stage, the handler, the record), and what a ``tool_call`` middleware receives; `ToolCall` is
the record it leaves, carrying every `Decision` taken about the call, whether the handler
``ran`` and its ``duration_ms``; `ToolDecision` is a decision about a tool for the rest of a
turn. See docs/architecture.md, "One call".
"""

from ._context import ToolCallContext as ToolCallContext
from ._context import ToolCallNext as ToolCallNext
from ._decision import Decision as Decision
from ._decision import DecisionAction as DecisionAction
from ._decision import DecisionWhen as DecisionWhen
from ._decision import LimitReading as LimitReading
from ._decision import ToolDecision as ToolDecision
from ._decision import ToolDecisionAction as ToolDecisionAction
from ._decision import Verdict as Verdict
from ._decision import verdict as verdict
from ._toolcall import ToolCall as ToolCall
from ._toolcall import ToolCallResults as ToolCallResults

__all__ = [
    "Decision",
    "DecisionAction",
    "DecisionWhen",
    "LimitReading",
    "ToolCall",
    "ToolCallContext",
    "ToolCallNext",
    "ToolCallResults",
    "ToolDecision",
    "ToolDecisionAction",
    "Verdict",
    "verdict",
]
