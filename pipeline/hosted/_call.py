"""`HostedCall`: one host call through loopware's ``tool_call`` stage, and what the host does next.

The call's record says what loopware decided; the host needs one of three answers:

* **forward** (`HostedCall.forwarded`): the host's handler ran and nothing withheld or replaced
  its outcome: give the host its own value (`value`);
* **raise** (`host_error`): the host's handler raised and nothing withheld it: re-raise the
  host's own exception (a pydantic-ai ``ModelRetry`` stays the host's control flow);
* **refuse**: anything else (denied, rejected, answered by a hook, invalid): the model reads
  `text`, the way the host shows a failed call (``ToolFailed``, an error ``ToolMessage``).

A fourth state belongs to hosts that pause a run for an approval across processes: a call made
with ``defer=True`` that reached an approval gate with no decision given is **deferred**
(`HostedCall.deferred`): nothing ran and nothing was stored; the host pauses the run (raises
``ApprovalRequired``, interrupts) and, resumed later, asks again for the same call id with
``approval=True`` or ``False`` (`HostedTurn.call`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..calls._run import unrun_record

if TYPE_CHECKING:
    from .._dispatch import DispatchContext
    from .._gate import Gate
    from ..calls._toolcall import ToolCall
    from ._tools import HostCentre

__all__ = ["HostedCall", "ended_record"]

_HOSTED: Final = "loopware.hosted"
"""The policy name of a decision the hosted seam takes itself."""

_FORWARDED: Final = frozenset({"allowed", "approved", "warned"})
"""Verdicts under which a call that ran keeps the host's own outcome."""
_UNSET: Final[Any] = object()
_ENCODER: Final = json.JSONEncoder(default=str, ensure_ascii=False)
"""Encodes a host's value as text (one encoder: ``json.dumps`` with options builds one per call)."""


def _no_op() -> None:
    return None


class HostedCall:
    """One host call: its arguments, the host's handler, and once run, its record and outcome.

    Built by `HostedTurn.call`; the same object answers a host that asks again for the same call
    id (a resumed run): loopware decides each call id once.
    """

    __slots__ = (
        "_centre",
        "_entered",
        "_hosts",
        "_parked",
        "_value",
        "approval",
        "call_id",
        "defer",
        "deferred",
        "host_error",
        "late",
        "name",
        "raw_args",
        "record",
        "validated",
    )

    def __init__(
        self,
        call_id: str,
        name: str,
        arguments: str | Mapping[str, Any],
        centre: HostCentre | None,
        validated: Mapping[str, Any] | None = None,
        entered: Callable[[], None] = _no_op,
        *,
        approval: bool | None = None,
        defer: bool = False,
        parked: Callable[[], None] = _no_op,
    ) -> None:
        """Describe one host call (`HostedTurn.call` builds it)."""
        self.call_id = call_id
        """The host's (the provider's) id of the call."""
        self.name = name
        """The tool name the model called."""
        raw: object = arguments
        if isinstance(arguments, str):
            try:
                raw = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                raw = arguments  # loopware's parser refuses it with the usual message
        self.raw_args: object = raw
        """The arguments as the model sent them (parsed when they were JSON text)."""
        self.validated = validated
        """The host's own validation of them (defaults applied), when the host gave it (as
        given: the call's validation copies it)."""
        self._centre = centre
        self._hosts = centre is not None  # the host gave its handler (kept after `finish`)
        self._entered = entered
        self._parked = parked
        self._value: Any = _UNSET
        self.host_error: BaseException | None = None
        """What the host's handler raised, if it ran and raised."""
        self.record: ToolCall | None = None
        """The call's stored record, once the ``tool_call`` stage has run."""
        self.approval = approval
        """The host's decision on the call's approval gate (a resumed call), if it gave one."""
        self.defer = defer
        """Whether a gate with no decision defers the call (the host pauses) instead of waiting."""
        self.deferred = False
        """True when the call stopped at an approval gate for the host to pause: nothing ran,
        nothing was stored, and the host resumes it later with a decision."""
        self.late = False
        """True when the call came to a turn that had ended before taking it: nothing ran and
        nothing was stored (`record` is the refusal the host may show the model). A host that
        runs on, as the MCP gateway does, runs it again in its next turn."""

    def __repr__(self) -> str:
        """Show the call and its verdict so far."""
        verdict: str | None = None if self.record is None else self.record.verdict
        if self.deferred:
            verdict = "deferred"
        return f"HostedCall(call_id={self.call_id!r}, tool={self.name!r}, verdict={verdict!r})"

    async def enter_centre(self, args: dict[str, Any]) -> str:
        """Run the host's handler with ``args`` (the onion's centre); return its value as text.

        The host's value is kept (`value`) for the host; loopware's record keeps the text.
        """
        entered = self._entered
        if entered is not _no_op:  # an announced call: the calls after it may go on
            entered()
        centre = self._centre
        if centre is None:  # a host tool called without its host's handler
            raise RuntimeError(f"no host handler was given for the call to {self.name!r}")
        try:
            value = await centre(args)
        except Exception as exc:
            self.host_error = exc
            raise
        self._value = value
        return _as_text(value)

    def gate_opened(self, gate: Gate[Any]) -> None:
        """An approval gate opened for this call: settle it as the host decided, or defer it.

        With the host's decision (`approval`) the gate is settled at once (``True`` approves,
        ``False`` rejects); without one, a call made with ``defer=True`` is marked `deferred`
        and its stage is stopped (`HostedTurn.call`); otherwise the gate waits as usual.
        """
        if self.approval is True:
            gate.resolve(True)
        elif self.approval is False:
            gate.reject("the call was rejected by the host's approver")
        elif self.defer and not self.deferred:
            self.deferred = True
            self._parked()

    def finish(self) -> None:
        """Let go of what only the call's run needed: the host's handler and the hand-offs.

        `HostedTurn.call` does this once the call is decided: a turn keeps its calls until it
        ends (a call id asked again gets the same object), and a host's per-call handler holds
        that host's per-call objects (its run context, the parsed call), which would otherwise
        live as long as the turn.
        """
        self._centre = None
        self._entered = self._parked = _no_op

    @property
    def has_centre(self) -> bool:
        """Whether the host gave its own handler (else a loopware `Tool` runs the call)."""
        return self._hosts

    @property
    def ran(self) -> bool:
        """True when the host's handler ran."""
        return self.record is not None and self.record.ran

    @property
    def value(self) -> Any:
        """The host's own return value (None when its handler did not return).

        For a call without a host handler (a loopware `Tool` ran), the record's results.
        """
        if self._value is _UNSET:
            record = self.record
            return record.results if not self._hosts and record is not None else None
        return self._value

    @property
    def forwarded(self) -> bool:
        """Whether the host's own outcome stands.

        Its handler ran and no decision replaced, withheld or refused it (the verdict is
        allowed, approved or warned).
        """
        record = self.record
        return (
            record is not None
            and record.ran
            and record.verdict in _FORWARDED
            and (self._value is not _UNSET or (not self._hosts and not record.is_error))
        )

    @property
    def raises(self) -> bool:
        """Whether the host's own exception stands (its handler raised, nothing replaced it)."""
        record = self.record
        return (
            self.host_error is not None
            and record is not None
            and record.ran
            and record.verdict in _FORWARDED
        )

    @property
    def text(self) -> str:
        """What the model reads for a call the host does not get its own outcome for."""
        record = self.record
        if record is None:
            if self.deferred:
                return "The call waits for an approval; it was not run."
            return "Error: the call was not run."
        results = record.results
        if isinstance(results, str):
            return results
        as_string = getattr(results, "as_string", None)
        return as_string() if callable(as_string) else str(results)


def _as_text(value: object) -> str:
    """The host's value as the text loopware's record keeps."""
    if isinstance(value, str):
        return value
    content = getattr(value, "content", None)
    if isinstance(content, str):  # a host's message object (a LangChain ``ToolMessage``)
        return content
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):
        return repr(value)


def ended_record(d: DispatchContext | None, call_id: str, name: str) -> ToolCall:
    """The refusal of a call that came to a turn already ended: denied, not run, not stored."""
    reason = "the loopware turn has ended"
    if d is not None and d.nack_error is not None:
        reason = f"{reason} ({d.nack_error})"
    return unrun_record(
        call_id,
        name,
        policy=_HOSTED,
        action="denied",
        reason=reason,
        text=f"Error: {reason}; the call was not run.",
    )


HostedCall.__module__ = "pipeline.hosted"
