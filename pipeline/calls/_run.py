"""`ToolCallContext`: one proposed call's run, from the provider's text to its `ToolCall` record.

Every call the model proposes gets one run, and its steps read in order:

1. **parse** the provider's argument text (`parse_arguments`: the one parser) and checksum it;
2. **look up** the tool among the turn's visible tools (a tool a decision took away says why;
   only a name never offered is unknown);
3. **validate** the arguments against the tool's schema;
4. the ``tool_call`` **onion**: the stage's middleware, outermost first, each awaiting
   ``call_next`` (zero layers is an empty onion: the handler is its centre);
5. the **handler**, at the centre, unless a layer decided first;
6. the **record**, built once from the run (`build_record`).

Whatever decides about the call appends a `Decision` to the run (``ctx.deny``, ``ctx.respond``,
``ctx.approve``, ``ctx.warn``, ``ctx.replace_args``, and the loop itself when a step refuses),
whether or not anybody listens; the record carries them with ``ran`` and ``duration_ms``. A
``tool_call`` middleware receives the run as its context. See ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from .._errors import (
    ArgumentsLockedError,
    CallDeniedError,
    CallRejectedError,
    DispatchPipelineError,
    InvalidToolArgsError,
    LoopError,
    NextCalledTwiceError,
    PipelineShortCircuitedError,
    ToolNotFoundError,
    ToolUnavailableError,
    TurnAbortedError,
)
from .._json import tool_call_checksum
from ._arguments import NAME_ECHO, UNNAMED, parse_arguments, shown_name
from ._decision import Decision, DecisionAction
from ._outcome import outcome_of
from ._toolcall import ToolCall, build_record

if TYPE_CHECKING:
    from .._context import ContextLog
    from .._dispatch import DispatchContext
    from .._gate import Gate
    from .._onion import Onion
    from .._registry import ToolRegistry
    from .._stash import Stash
    from .._tool import Tool, ToolOutput
    from .._turn_state import TurnState

__all__ = ["ToolCallContext", "ToolCallNext", "unrun_record"]

T = TypeVar("T")

ToolCallNext = Callable[[], Awaitable[None]]
"""The ``call_next`` of a ``tool_call`` middleware: runs the inner layers and the handler.
Afterwards the context tells what happened (``ran``, ``error``, ``output``, ``is_error``)."""

_NOTHING: Final[Any] = object()
"""No outcome yet (``_output``): the handler has not returned and nobody answered."""

REGISTRY: Final = "loopware.registry"
"""The policy name of the loop's own refusals of a tool name (unknown, or taken away)."""
ARGUMENTS: Final = "loopware.arguments"
"""The policy name of the loop's own refusals of arguments (not JSON, failing the schema)."""


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
        "_args",
        "_called",
        "_decisions",
        "_failing",
        "_layer",
        "_locked",
        "_message",
        "_model_args",
        "_onion",
        "_output",
        "_pos",
        "_raw_args",
        "_turn",
        "_vchecksum",
        "_vjson",
        "call_id",
        "checksum",
        "dispatch",
        "duration_ms",
        "error",
        "name",
        "ran",
        "tool",
    )

    tool: Tool[Any]
    """The tool the call names (set once the lookup found it)."""
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
        self.name = name
        """The tool name as the model proposed it."""
        self.ran = False
        """True once the handler was invoked for this call."""
        self.duration_ms: float | None = None
        """How long the handler ran, in milliseconds (None until it ran)."""
        self.error: LoopError | None = None
        """The error the handler raised (wrapped as loopware wraps it), if it raised."""
        self._decisions: list[Decision] | None = None
        self._output: Any = _NOTHING
        self._message: str | None = None
        self._vchecksum: str | None = None
        # what only the layers of the onion use is set when it starts (`_through`)

    def __repr__(self) -> str:
        """Show the call and how far it got."""
        return (
            f"ToolCallContext(call_id={self.call_id!r}, tool={self.name!r}, "
            f"iteration={self.dispatch.iteration}, state={self._state()})"
        )

    def _state(self) -> str:
        if self._message is not None:
            return "refused"
        return "ran" if self.ran else "answered" if self._output is not _NOTHING else "pending"

    # -- the steps -------------------------------------------------------------------------------
    async def run(
        self, registry: ToolRegistry, arguments: object, onion: Onion, inline_limit: int
    ) -> ToolCall:
        """Parse, look up, validate, run the onion and the handler; return the record.

        Raises:
            TurnAbortedError: the handler or a hook aborted the turn (the run is kept for the
                record of the abandoned call, see `abandon`).
        """
        name = self.name
        shown = shown_name(name) or UNNAMED
        try:
            raw = self._raw_args = self._model_args = parse_arguments(name, arguments)
            self.checksum = tool_call_checksum(shown, raw)
        except InvalidToolArgsError as exc:
            return self._unparsed(shown, exc)
        except (TypeError, RecursionError):
            error = InvalidToolArgsError(
                f"the arguments for {shown!r} are nested too deeply; send a flatter JSON object.",
                tool_name=shown,
            )
            return self._unparsed(shown, error)
        tool = registry.get_visible(name) if name else None
        if tool is None:
            return self._not_offered(registry)
        self.tool = tool
        try:
            self._args = tool.validate(raw)
        except InvalidToolArgsError as exc:
            return self._refused(ARGUMENTS, "invalid", exc)
        try:
            if onion.fns:
                await self._through(onion)
            else:  # the empty onion: its centre is the handler
                await self._handle()
        except BaseException:  # an abort or a cancellation (everything else became a record)
            self._turn.keep_interrupted(self)  # its record: `abandon`
            raise
        return self._record(inline_limit)

    async def _through(self, onion: Onion) -> None:
        """Run the ``tool_call`` middleware around the handler, outermost first.

        A layer that raises (or awaits ``call_next`` twice) fails the call, reported as a
        ``tool_call`` stage error; a layer that returns without ``call_next`` and without
        deciding (`deny`, `respond`) fails it with `PipelineShortCircuitedError`.
        """
        self._onion = onion
        self._pos = 0
        self._called: int = 0
        self._layer = onion.names[0]
        self._failing: str | None = None
        self._locked = False
        self._vjson: dict[str, Any] | None = None
        try:
            await onion.fns[0](self, self._next)
        except TurnAbortedError:
            raise
        except Exception as exc:
            self._hook_failed(exc)
            return
        self._check_decided(0)

    async def _next(self) -> None:
        """The ``call_next`` of every layer: enter the next layer, or the handler at the centre."""
        i = self._pos
        onion = self._onion
        if self._called & (1 << i):
            name = onion.names[i]
            raise NextCalledTwiceError(
                f"middleware {name!r} awaited call_next() twice", middleware=name
            )
        self._called |= 1 << i
        j = i + 1
        if j == len(onion.fns) or self._message is not None or self._output is not _NOTHING:
            await self._handle()
            return
        self._pos, self._layer = j, onion.names[j]
        try:
            await onion.fns[j](self, self._next)
        except Exception:
            if self._failing is None:  # the innermost layer the exception left
                self._failing = onion.names[j]
            raise
        finally:
            self._pos, self._layer = i, onion.names[i]
        self._check_decided(j)

    def _check_decided(self, j: int) -> None:
        """After layer ``j`` returned: fail the call if it neither went on nor decided."""
        if self._called & (1 << j) or self._message is not None or self._output is not _NOTHING:
            return
        name = self._onion.names[j]
        error = PipelineShortCircuitedError(
            f"tool_call middleware {name!r} returned without call_next(), deny() or respond()",
            stage="tool_call",
            middleware=name,
        )
        self._turn.report(error, "tool_call")
        self._fail(name, error)

    def _hook_failed(self, exc: Exception) -> None:
        name = self._failing or self._onion.names[self._pos]
        if isinstance(exc, LoopError):
            error = exc
        else:
            error = DispatchPipelineError(
                f"tool_call middleware {name!r} raised {type(exc).__name__}: {exc}",
                stage="tool_call",
                middleware=name,
            )
            error.__cause__ = exc
        self._turn.report(error, "tool_call")
        self._fail(name, error)

    def _unparsed(self, shown: str, error: InvalidToolArgsError) -> ToolCall:
        """The record of a call whose arguments are unusable as given (kept as ``{}``)."""
        self._raw_args = self._model_args = {}
        self.checksum = tool_call_checksum(shown, {})
        return self._refused(ARGUMENTS, "invalid", error)

    def _not_offered(self, registry: ToolRegistry) -> ToolCall:
        """The record of a call to a name that is not among the visible tools."""
        name, shown = self.name, shown_name(self.name)
        available = ", ".join(t.name for t in registry.visible()) or "(none)"
        taken = self._turn.taken_tools.get(name) if name else None
        if taken is None:
            error: LoopError = ToolNotFoundError(
                f"unknown tool {shown!r}; available tools: {available}", tool_name=shown
            )
            return self._refused(REGISTRY, "invalid", error, f"unknown tool {shown!r}")
        how = "hidden" if taken.action == "hidden" else "withdrawn"
        error = ToolUnavailableError(
            f"tool {name!r} is no longer available in this turn ({taken.policy}: "
            f"{taken.reason}); available tools: {available}",
            tool_name=name,
            policy=taken.policy,
            reason=taken.reason,
        )
        return self._refused(taken.policy, "denied", error, f"the tool was {how}: {taken.reason}")

    def _refused(
        self, policy: str, action: DecisionAction, error: LoopError, reason: str | None = None
    ) -> ToolCall:
        """The record of a call a step refused before the onion (it never ran)."""
        self._decide(policy, action, reason if reason is not None else error.message)
        self._message = f"Error: {error}"
        return self._record(0)

    async def _handle(self) -> None:
        """The innermost step: run the handler, unless a layer already decided the call."""
        if self._message is not None or self._output is not _NOTHING:
            return
        self.ran = True
        start = perf_counter()
        try:
            self._output = await self.tool.run(
                self.dispatch,
                self._raw_args,
                call_id=self.call_id,
                checksum=self.checksum,
                validated=self._args,
            )
        except TurnAbortedError:
            raise
        except LoopError as exc:
            self.error = exc
        finally:
            self.duration_ms = (perf_counter() - start) * 1000.0

    def _fail(self, layer: str, error: LoopError) -> None:
        """A layer raised or did not decide: the call fails with ``error``."""
        self._output = _NOTHING
        self._decide(layer, "failed", error.message)
        self._message = f"Error: {error}"

    def abandon(self, reason: str) -> ToolCall:
        """The record of this call after the turn's abort interrupted it (the loop calls it).

        What the run did so far is kept (``ran``, its decisions, ``duration_ms``), with an
        ``"aborted"`` decision; the model reads that the turn was aborted while (or before)
        the call ran.
        """
        self._output = _NOTHING
        self._decide("loopware.turn", "aborted", reason)
        when = "while" if self.ran else "before"
        self._message = f"Error: the turn was aborted {when} this call ran."
        return self._record(0)

    def _record(self, inline_limit: int) -> ToolCall:
        """Build the call's record from the run (the only place the loop builds one)."""
        name = self.name
        tool_name = name if 0 < len(name) <= NAME_ECHO else shown_name(name) or UNNAMED
        results: Any
        inline = from_artifact_tool = False
        is_error = True
        if self._message is not None:
            results = self._message
        elif self.error is not None and self._output is _NOTHING:
            results = f"Error: {self.error}"
        else:
            outcome = outcome_of(self.tool, self._output, inline_limit, self._turn, self.call_id)
            if isinstance(outcome, str):
                results = outcome
            else:
                results, inline, from_artifact_tool = outcome
                is_error = False
        decisions = self._decisions
        return build_record(  # positionally: the hot path (see the parameters' names there)
            self.call_id,
            tool_name,
            self._model_args,
            self.checksum,
            results,
            is_error,
            from_artifact_tool,
            inline,
            self.ran,
            () if decisions is None else tuple(decisions),
            self.duration_ms,
            self._vchecksum,
        )

    # -- the call --------------------------------------------------------------------------------
    @property
    def tool_name(self) -> str:
        """The name of the tool the call names."""
        return self.tool.name

    @property
    def raw_args(self) -> Mapping[str, Any]:
        """The arguments as the model sent them (or as last replaced), before validation."""
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
            self._vjson = self.tool.dump_args(self._args)
        return self._vjson

    @property
    def validated_checksum(self) -> str:
        """`tool_call_checksum` of the tool name and `validated_args`, computed on first read.

        Calls that differ only by spelling out a default share it; it is kept on the record.
        """
        vchecksum = self._vchecksum
        if vchecksum is None:
            validated = self.validated_args
            # the arguments as sent, when they already are the validated ones, checksum alike
            # (same JSON data: strict validation never turns a bool into a number or back)
            if validated == self._raw_args and self._raw_args is self._model_args:
                vchecksum = self.checksum
            else:
                vchecksum = tool_call_checksum(self.tool.name, validated)
            self._vchecksum = vchecksum
        return vchecksum

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
                f"the arguments of the call to {self.tool.name!r} were approved; "
                f"{self._layer} cannot replace them",
                tool_name=self.tool.name,
                call_id=self.call_id,
            )
        validated = self.tool.validate(raw_args)
        self._raw_args = dict(raw_args)
        self._args = validated
        self._vjson = self._vchecksum = None
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
        if self.ran or self._output is _NOTHING:
            return None
        output: ToolOutput = self._output
        return output

    @property
    def output(self) -> object:
        """What the handler returned (or a hook answered with); None when there is none yet."""
        return None if self._output is _NOTHING else self._output

    @property
    def is_error(self) -> bool:
        """True when the call stands refused, or its handler raised and nobody answered."""
        return self._message is not None or (self.error is not None and self._output is _NOTHING)

    def deny(
        self,
        reason: str,
        *,
        policy: str | None = None,
        action: Literal["denied", "rejected"] = "denied",
        message: str | None = None,
    ) -> None:
        """Refuse the call: no handler runs, and the model reads why.

        Called after ``await call_next()``, it withholds the handler's outcome instead. The
        decision (``action``, ``"rejected"`` for an approval said no) is appended to the call's
        record under ``policy`` (default: this middleware's name). The model reads
        ``Error: E_CALL_DENIED: <policy> denied the call to '<tool>': <reason>; ...``
        (``E_CALL_REJECTED`` for a rejection), or ``Error: <message>`` when given.
        """
        who = self._decide(policy, action, reason)
        self._output = _NOTHING
        if message is None:
            after = "it ran, but its result is withheld" if self.ran else "it was not run"
            error_type = CallRejectedError if action == "rejected" else CallDeniedError
            error = error_type(
                f"{who} {action} the call to {self.tool.name!r}: {reason}; {after}",
                policy=who,
                reason=reason,
                tool_name=self.tool.name,
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

    def approve(self, reason: str = "approved", *, policy: str | None = None) -> None:
        """Record that the call was approved; its arguments can no longer be replaced.

        `replace_args` raises `ArgumentsLockedError` from now on, so the handler receives the
        arguments the approver saw.
        """
        self._decide(policy, "approved", reason)
        self._locked = True

    def warn(self, reason: str, *, policy: str | None = None) -> None:
        """Record a warning about the call; it goes on."""
        self._decide(policy, "warned", reason)

    def _decide(self, policy: str | None, action: DecisionAction, reason: str) -> str:
        who = self._layer if policy is None else policy
        decision = Decision(
            policy=who, action=action, reason=reason, when="after" if self.ran else "before"
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


def unrun_record(
    call_id: str, name: str, *, policy: str, action: DecisionAction, reason: str, text: str
) -> ToolCall:
    """The record of a call that was answered without a run (the model reads ``text``)."""
    shown = shown_name(name) or UNNAMED
    return build_record(
        call_id,
        shown,
        {},
        tool_call_checksum(shown, {}),
        text,
        True,
        decisions=(Decision(policy=policy, action=action, reason=reason),),
    )


ToolCallContext.__module__ = "pipeline"
