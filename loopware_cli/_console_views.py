"""The console's values: what each page shows of a call, a turn, a gate, an answer, the chain.

Plain frozen values built by ``loopware_cli/_console_data.py`` and rendered by the templates;
`Filters` is what a page's query string asks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

__all__ = [
    "AnswerView",
    "CallView",
    "ChainView",
    "DecisionView",
    "Filters",
    "GateView",
    "HookView",
    "TurnView",
]


@dataclass(frozen=True, slots=True)
class DecisionView:
    """One decision taken about a call."""

    action: str
    """What was decided (``approved``, ``denied``...)."""
    policy: str
    """Who decided."""
    reason: str
    """Why, as the policy put it."""
    when: str
    """``before`` or ``after`` the handler ran."""


@dataclass(frozen=True, slots=True)
class CallView:
    """A call as its audit row records it, with its result preview when a store is read."""

    row: int
    """The index of its audit row."""
    call_id: str
    """The provider's id of the call."""
    tool: str
    """The tool's name."""
    turn_id: str
    """Its turn."""
    conversation_id: str | None
    """Its turn's conversation."""
    verdict: str
    """The one word for the call (``ToolCall.verdict``)."""
    ran: bool | None
    """Whether the handler ran (None on rows written before the field existed)."""
    duration_ms: float | None
    """How long the handler ran."""
    is_error: bool
    """The call's record is an error."""
    args: str
    """The arguments, as indented JSON text."""
    decisions: tuple[DecisionView, ...]
    """Every decision taken about it, in order."""
    result: str | None = None
    """The start of its result (None: no store was read, or it holds no such call)."""


@dataclass(frozen=True, slots=True)
class TurnView:
    """A turn: how it ended (or that it has not) and its calls in order."""

    turn_id: str
    """The turn's id."""
    conversation_id: str | None
    """Its conversation."""
    status: str
    """``completed``, ``failed``, ``aborted``, ``waiting`` (a gate holds it) or ``running``."""
    input: str | None
    """The user input (from its turn row)."""
    duration_ms: float | None
    """How long it lasted."""
    error: str | None
    """``CODE: message`` of a failed turn."""
    usage: str | None
    """Its token usage, when the durable runner's outcome is read."""
    calls: tuple[CallView, ...]
    """Its calls, in the order they were stored."""
    ended_at: datetime | None
    """When its turn row was written."""


@dataclass(frozen=True, slots=True)
class GateView:
    """A gate a durable turn waits on."""

    gate_id: str
    """Its durable id, ``<turn id>:gate-<n>``."""
    turn_id: str
    """The waiting turn."""
    tool: str | None
    """The tool whose call waits (an `ApprovalGate`'s gate), if any."""
    call_id: str | None
    """That call's id."""
    reason: str
    """Why the turn waits."""
    args: str
    """The validated arguments the handler will receive (or the gate's payload), as JSON text."""


@dataclass(frozen=True, slots=True)
class AnswerView:
    """A gate answered from the console, as its ``answer`` audit row records it."""

    row: int
    """The index of the row."""
    gate_id: str
    """The gate answered."""
    turn_id: str
    """The turn it held."""
    tool: str | None
    """The tool of the call it held."""
    decision: str
    """``approved`` or ``rejected``."""
    who: str
    """Who answered (``console:<name>``)."""
    reason: str | None
    """The reason given."""
    recorded_at: datetime
    """When."""


@dataclass(frozen=True, slots=True)
class ChainView:
    """The chain's verification state."""

    ok: bool
    """The chain holds."""
    rows_checked: int
    """How many rows were checked."""
    first_bad_row: int | None
    """The first row out of place, when it does not hold."""
    reason: str | None
    """The reason code (``E_AUDIT_...``), when it does not hold."""
    text: str
    """The sentence ``loopware audit verify`` prints."""


@dataclass(frozen=True, slots=True)
class Filters:
    """What a page shows: one conversation, tool or decision (empty: all)."""

    conversation: str = ""
    """Calls and turns of this conversation only."""
    tool: str = ""
    """Calls of this tool only."""
    decision: str = ""
    """Calls with this verdict only."""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Filters:
        """The filters a page's query string names."""
        return cls(
            conversation=query.get("conversation", "").strip(),
            tool=query.get("tool", "").strip(),
            decision=query.get("decision", "").strip(),
        )

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.conversation or self.tool or self.decision)

    def query(self) -> str:
        """The query string that names these filters (empty when none is set)."""
        pairs = [(k, v) for k, v in self._pairs() if v]
        return urlencode(pairs)

    def _pairs(self) -> list[tuple[str, str]]:
        return [
            ("conversation", self.conversation),
            ("tool", self.tool),
            ("decision", self.decision),
        ]

    def keeps_call(self, call: CallView) -> bool:
        """Whether ``call`` matches every filter set."""
        return (
            (not self.conversation or call.conversation_id == self.conversation)
            and (not self.tool or call.tool == self.tool)
            and (not self.decision or call.verdict == self.decision)
        )

    def keeps_turn(self, turn: TurnView) -> bool:
        """Whether ``turn`` is of the conversation, and has a call matching tool and decision."""
        if self.conversation and turn.conversation_id != self.conversation:
            return False
        if not self.tool and not self.decision:
            return True
        return any(self.keeps_call(call) for call in turn.calls)


@dataclass(frozen=True, slots=True)
class HookView:
    """An approval the MCP gateway waits for on the console's webhook."""

    hook_id: str
    """The console's id for it (what the answer form names)."""
    tool: str
    """The tool called."""
    call_id: str
    """The call's id."""
    args: str
    """The arguments the handler will receive, as indented JSON text."""
    reason: str
    """The gate's text."""
    principal: str | None
    """Who called the gateway, when it said."""
    conversation: str | None
    """The gateway turn's conversation, when it said."""
    received_at: datetime
    """When the request arrived."""
    waited: str
    """How long it has waited, as text (``42 s``, ``3 min 5 s``)."""
