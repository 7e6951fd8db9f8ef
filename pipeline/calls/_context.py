"""`ToolCallContext`: what a ``tool_call`` middleware sees of the one call it wraps.

A call's run (``pipeline/calls/_run.py``) is a `ToolCallContext`: this module holds what a hook
reads and decides with (the call, its arguments, its decisions so far, the turn around it);
the run's steps live in the run's own module. Every decision (`deny`, `respond`, `approve`,
`warn`, `replace_args`) is appended to the call's record whether or not anybody listens. See
docs/architecture.md, "One call".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from .._frozen import FrozenDict, freeze_json
from .._json import tool_call_checksum
from ..errors import (
    ArgumentsLockedError,
    CallDeniedError,
    CallRejectedError,
    InvalidToolArgsError,
    LoopError,
)
from ._decision import Decision, DecisionAction, LimitReading
from ._outcome import is_tool_output

if TYPE_CHECKING:
    from .._context import ContextLog
    from .._dispatch import DispatchContext
    from .._gate import Gate
    from .._onion import Onion
    from .._registry import ToolRegistry
    from .._stash import Stash
    from .._tool import Tool, ToolOutput
    from .._turn_state import TurnState

__all__ = ["NOTHING", "ToolCallContext", "ToolCallNext"]

T = TypeVar("T")

ToolCallNext = Callable[[], Awaitable[None]]
"""The ``call_next`` of a ``tool_call`` middleware: runs the inner layers and the handler.
Afterwards the context tells what happened (``ran``, ``error``, ``output``, ``is_error``)."""

NOTHING: Final[Any] = object()
"""No outcome yet (``_output``): the handler has not returned and nobody answered."""


class ToolCallContext:
    """One proposed call on its way to its record; what a ``tool_call`` middleware sees.

    ``args`` are the validated arguments the handler will receive (defaults applied);
    ``raw_args`` the arguments as the model sent them (or as a hook replaced them), which the
    ``checksum`` is computed over. Decide with `deny`, `respond`, `approve` or `warn`; each
    appends a `Decision` to the call's record. `deny` and `respond` work before
    ``await call_next()`` (the handler never runs) or after it (its outcome is replaced).
    After ``call_next`` returns, ``ran``, ``error`` and ``output`` tell what the handler did.
    """

    __slots__ = (
        "_approved",
        "_args",
        "_decided",
        "_decisions",
        "_locked",
        "_message",
        "_model_args",
        "_onion",
        "_output",
        "_pos",
        "_raw_args",
        "_tool",
        "_turn",
        "_unparsed",
        "_vchecksum",
        "_vjson",
        "call_id",
        "checksum",
        "dispatch",
        "duration_ms",
        "error",
        "ran",
        "tool_name",
    )

    _tool: Tool[Any]  # set once the lookup found it
    # set by the run's steps (``pipeline/calls/_run.py``) as it gets that far
    _raw_args: FrozenDict
    _model_args: FrozenDict
    _approved: dict[str, Any]
    _args: Any
    _onion: Onion
    _pos: int
    _locked: bool
    _vjson: dict[str, Any] | None
    checksum: str
    """`tool_call_checksum` of the tool name and the raw arguments: what was asked (set once the
    arguments are parsed)."""

    def __init__(
        self, dispatch: DispatchContext, turn: TurnState, call_id: str, name: str
    ) -> None:
        """Start the run of the call ``call_id`` to ``name`` (`DispatchContext.run_tool` does)."""
        self._turn = turn
        self.dispatch = dispatch
        """The dispatch the call belongs to (stash, registry, iteration, gates, log)."""
        self.call_id = call_id
        """The provider's id of the call: the id its record is stored under."""
        given: object = name
        self.tool_name: Final = name if isinstance(given, str) else ""  # a seam's null
        """The tool name as the model proposed it: by the time a hook sees the call, exactly
        the name of `tool` (a registry looks names up exactly). Read-only: the handler that
        runs and the record are the looked-up tool's whatever a hook writes here."""
        self.ran = False
        """True once the handler was invoked for this call."""
        self.duration_ms: float | None = None
        """How long the handler ran, in milliseconds (None until it ran)."""
        self.error: LoopError | None = None
        """The error the handler raised (wrapped as loopware wraps it), if it raised."""
        self._decisions: list[Decision] | None = None
        self._decided = False  # denied, answered or failed: the handler will not run
        self._output: Any = NOTHING
        self._message: str | None = None
        self._vchecksum: str | None = None
        self._unparsed: str | None = None  # the arguments text, when it did not parse
        # what only the layers of the onion use is set when it starts (`CallRun._enter`)

    def __repr__(self) -> str:
        """Show the call and how far it got."""
        return (
            f"ToolCallContext(call_id={self.call_id!r}, tool={self.tool_name!r}, "
            f"iteration={self.dispatch.iteration}, state={self._state()})"
        )

    @property
    def _layer(self) -> str:
        """The name of the middleware now deciding (the layer or check the run is in)."""
        return self._onion.names[max(self._pos, 0)]

    def _state(self) -> str:
        if self._message is not None:
            return "refused"
        return "ran" if self.ran else "answered" if self._output is not NOTHING else "pending"

    @property
    def tool(self) -> Tool[Any]:
        """The tool the call names: the one whose handler runs.

        Read-only: a hook cannot swap it after the policies judged the call.
        """
        return self._tool

    @property
    def raw_args(self) -> Mapping[str, Any]:
        """The arguments as the model sent them (or as last replaced), before validation.

        Read-only at every depth (the record keeps them as they are): replace them with
        `replace_args`.
        """
        return self._raw_args

    @property
    def args(self) -> Any:
        """The validated arguments the handler will receive (an instance of the input schema)."""
        return self._args

    @property
    def validated_args(self) -> dict[str, Any]:
        """``args`` as JSON data (defaults applied), computed on first read.

        What the handler receives, as an approver or an audit shows it.
        """
        if self._vjson is None:
            self._vjson = self._tool.dump_args(self._args)
        return self._vjson

    @property
    def validated_checksum(self) -> str:
        """`tool_call_checksum` of the tool name and `validated_args`, computed on first read.

        Calls that differ only by spelling out a default share it; it is kept on the record,
        where repetition checks count it. Once read it is fixed for the call: a later
        `replace_args` (an inner hook normalising the arguments) does not change it, so the
        record carries the checksum the call was compared by.
        """
        vchecksum = self._vchecksum
        if vchecksum is None:
            validated = self._vjson
            if validated is None:
                validated = self._vjson = self._tool.dump_args(self._args)
            # the arguments as sent, when they already are the validated ones, checksum alike
            # (same JSON data: strict validation never turns a bool into a number or back)
            if validated == self._raw_args and self._raw_args is self._model_args:
                vchecksum = self.checksum
            else:
                vchecksum = tool_call_checksum(self._tool.name, validated)
            self._vchecksum = vchecksum
        return vchecksum

    @property
    def identical_calls(self) -> int:
        """How many other calls of the turn ask what this one asks (its `validated_checksum`).

        The stored calls (history included: `DispatchContext.validated_call_count`) and this
        iteration's calls on their way: those whose hooks read this number and whose records
        are not stored yet (the earlier calls of a batch, run in parallel or not). The call
        itself is never counted, however often its hooks run (a call deferred at an approval
        gate and resumed). What a repetition check compares against its threshold, with no
        state of its own.
        """
        vchecksum = self._vchecksum or self.validated_checksum
        turn = self._turn
        judged = turn.judged
        judged[self.call_id] = vchecksum
        n = turn.validated.get(vchecksum, 0)
        if len(judged) > 1:
            n += [*judged.values()].count(vchecksum) - 1
        return n

    def replace_args(
        self, raw_args: Mapping[str, Any], *, reason: str = "arguments replaced"
    ) -> None:
        """Replace the arguments the handler will receive; they are validated again here.

        The record keeps the model's own arguments and checksum (what was asked) and gains a
        ``"rewritten"`` decision naming this middleware.

        Raises:
            ArgumentsLockedError: an approver already approved the call's arguments (the
                handler receives what the approver saw; the call fails if this propagates).
            InvalidToolArgsError: the new arguments fail the tool's schema (if the hook lets it
                propagate, the call fails and is not run).
        """
        if self._locked:
            raise ArgumentsLockedError(
                f"the arguments of the call to {self._tool.name!r} were approved; "
                f"{self._layer} cannot replace them",
                tool_name=self._tool.name,
                call_id=self.call_id,
            )
        validated = self._tool.validate(raw_args)
        try:
            self._raw_args = freeze_json(raw_args, "args")
        except TypeError as exc:
            raise InvalidToolArgsError(
                f"the replacement arguments for {self._tool.name!r} are not JSON data: {exc}",
                tool_name=self._tool.name,
            ) from None
        self._args = validated
        self._vjson = None  # a `validated_checksum` already read stays: see there
        self._decide(None, "rewritten", reason)

    # -- decisions -------------------------------------------------------------------------------
    @property
    def decisions(self) -> tuple[Decision, ...]:
        """The decisions taken about the call so far, in order."""
        return () if self._decisions is None else tuple(self._decisions)

    @property
    def denied(self) -> str | None:
        """The text the model reads for a refused call (``deny``), or None."""
        return None if self._message is None else self._message.removeprefix("Error: ")

    @property
    def response(self) -> ToolOutput | None:
        """The output a hook answered with (``respond``), or None."""
        if self.ran or self._output is NOTHING:
            return None
        output: ToolOutput = self._output
        return output

    @property
    def output(self) -> object:
        """What the handler returned (or a hook answered with); None when there is none yet."""
        return None if self._output is NOTHING else self._output

    @property
    def is_error(self) -> bool:
        """True when the call's record will be an error as things stand.

        It is refused, its handler raised and nobody answered, or its output is not a tool
        output (a handler returned an object loopware cannot show the model).
        """
        if self._message is not None:
            return True
        output = self._output
        if output is NOTHING:
            return self.error is not None
        return not is_tool_output(self._tool, output)

    def deny(
        self,
        reason: str,
        *,
        policy: str | None = None,
        action: Literal["denied", "rejected"] = "denied",
        message: str | None = None,
        limit: LimitReading | None = None,
    ) -> None:
        """Refuse the call: no handler runs, and the model reads why.

        Called after ``await call_next()``, it withholds the handler's outcome instead. The
        decision (``action``, ``"rejected"`` for an approval said no) is appended to the call's
        record under ``policy`` (default: this middleware's name). The model reads
        ``Error: E_CALL_DENIED: <policy> denied the call to '<tool>': <reason>; ...``
        (``E_CALL_REJECTED`` for a rejection), or ``Error: <message>`` when given. A counting
        limit passes its ``limit`` reading (scope, key, count), kept on the decision.
        """
        who = self._decide(policy, action, reason, limit)
        self._output = NOTHING
        self._decided = True
        if message is None:
            after = "it ran, but its result is withheld" if self.ran else "it was not run"
            error_type = CallRejectedError if action == "rejected" else CallDeniedError
            error = error_type(
                f"{who} {action} the call to {self._tool.name!r}: {reason}; {after}",
                policy=who,
                reason=reason,
                tool_name=self._tool.name,
                call_id=self.call_id,
            )
            message = str(error)
        self._message = f"Error: {message}"

    def respond(self, output: ToolOutput, *, reason: str = "answered by middleware") -> None:
        """Answer the call with ``output`` as if the handler had returned it (a cached result).

        Before ``await call_next()`` the handler never runs; after it, the handler's outcome is
        replaced. Text is inlined or spooled like any handler's text. Appends an
        ``"answered"`` decision under this middleware's name.
        """
        self._decide(None, "answered", reason)
        self._output = output
        self._message = None
        self._decided = True

    def approve(self, reason: str = "approved", *, policy: str | None = None) -> None:
        """Record that the call was approved; its arguments can no longer change.

        The approval is of `validated_args` as they read now (show the approver those).
        `replace_args` raises `ArgumentsLockedError` from now on, and a call whose arguments
        were changed in place afterwards fails with it instead of running: the handler receives
        the arguments the approver saw, or nothing.
        """
        self._approved = self.validated_args
        self._decide(policy, "approved", reason)
        self._locked = True

    def warn(self, reason: str, *, policy: str | None = None) -> None:
        """Record a warning about the call; it goes on."""
        self._decide(policy, "warned", reason)

    def _decide(
        self,
        policy: str | None,
        action: DecisionAction,
        reason: str,
        limit: LimitReading | None = None,
    ) -> str:
        who = self._layer if policy is None else policy
        decision = Decision(
            policy=who,
            action=action,
            reason=reason,
            when="after" if self.ran else "before",
            limit=limit,
        )
        if self._decisions is None:
            self._decisions = [decision]
        else:
            self._decisions.append(decision)
        return who

    # -- the turn around it ----------------------------------------------------------------------
    @property
    def turn_id(self) -> str:
        """The turn's id."""
        return self.dispatch.turn_id

    @property
    def stash(self) -> Stash:
        """The turn's stash."""
        return self.dispatch.stash

    @property
    def tools(self) -> ToolRegistry:
        """The turn's registry."""
        return self.dispatch.tools

    @property
    def iteration(self) -> int:
        """The dispatch iteration the call was proposed in."""
        return self.dispatch.iteration

    @property
    def log(self) -> ContextLog:
        """The turn's logger."""
        return self.dispatch.log

    async def wait_for(self, gate: Gate[T]) -> T:
        """Pause this call until ``gate`` is settled (see `TurnContext.wait_for`)."""
        return await self.dispatch.wait_for(gate)


ToolCallContext.__module__ = "pipeline.calls"
