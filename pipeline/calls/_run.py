"""A call's run: from the provider's text to its `ToolCall` record, in one pass.

Every call the model proposes gets one run (`CallRun`, the `ToolCallContext` its hooks see),
and its steps read in order:

1. **parse** the provider's argument text (`parse_arguments`: the one parser) and checksum it;
2. **look up** the tool among the turn's visible tools (a tool a decision took away says why;
   only a name never offered is unknown);
3. **validate** the arguments against the tool's schema;
4. the ``tool_call`` **onion**: the stage's middleware, outermost first, each awaiting
   ``call_next`` (zero layers is an empty onion: the handler is its centre);
5. the **handler**, at the centre, unless a layer decided first;
6. the **record**, built once from the run (`build_record`).

Whatever decides about the call appends a `Decision` to the run (the hooks through
`ToolCallContext`, and the loop itself when a step refuses), whether or not anybody listens;
the record carries them with ``ran`` and ``duration_ms``. See docs/architecture.md, "One call".
"""

from __future__ import annotations

from inspect import isawaitable
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from .._frozen import FrozenDict, freeze_json
from .._json import tool_call_checksum
from ..errors import (
    ArgumentsLockedError,
    DispatchPipelineError,
    InvalidToolArgsError,
    LoopError,
    NextCalledTwiceError,
    PipelineShortCircuitedError,
    ToolNotFoundError,
    ToolUnavailableError,
    TurnAbortedError,
)
from ._arguments import NAME_ECHO, UNNAMED, parse_arguments, shown_name
from ._context import NOTHING, ToolCallContext
from ._decision import Decision, DecisionAction
from ._outcome import outcome_of
from ._toolcall import ToolCall, build_record

if TYPE_CHECKING:
    from .._onion import Onion
    from .._registry import ToolRegistry

__all__ = ["CallRun", "interrupted_record", "unrun_record"]

REGISTRY: Final = "loopware.registry"
"""The policy name of the loop's own refusals of a tool name (unknown, or taken away)."""
NO_ARGS: Final = FrozenDict()
"""The arguments a record keeps for a call whose own are unusable."""
ARGUMENTS: Final = "loopware.arguments"
"""The policy name of the loop's own refusals of arguments (not JSON, failing the schema)."""


class CallRun(ToolCallContext):
    """One proposed call's run: the loop's steps over the context its hooks see.

    `DispatchContext.run_tool` makes one per call; see the module docstring.
    """

    __slots__ = ("_called", "_failing", "_shown")

    async def run(
        self, registry: ToolRegistry, arguments: object, onion: Onion, inline_limit: int
    ) -> ToolCall:
        """Parse, look up, validate, run the onion and the handler; return the record.

        Raises:
            TurnAbortedError: the handler or a hook aborted the turn (the run is kept for the
                record of the abandoned call, see `abandon`).
        """
        name = self.tool_name
        shown = self._shown = name if 0 < len(name) <= NAME_ECHO else shown_name(name) or UNNAMED
        try:
            raw = parse_arguments(shown, arguments)  # a plain dict: what checksum and
            self.checksum = tool_call_checksum(shown, raw)  # validation read fastest
            self._raw_args = self._model_args = freeze_json(raw)  # what hooks and the record see
        except InvalidToolArgsError as exc:
            return self._refuse_unparsed(shown, exc, arguments)
        except (TypeError, RecursionError):
            error = InvalidToolArgsError(
                f"the arguments for {shown!r} are nested too deeply; send a flatter JSON object.",
                tool_name=shown,
            )
            return self._refuse_unparsed(shown, error, arguments)
        tool = registry.get_visible(name) if name else None
        if tool is None:
            return self._not_offered(registry)
        self._tool = tool
        try:
            self._args = tool.validate(raw)
        except InvalidToolArgsError as exc:
            return self._refused(ARGUMENTS, "invalid", exc)
        try:
            if not onion.fns:  # the empty onion: its centre is the handler
                await self._handle()
            else:  # the tool_call middleware around the handler, outermost first
                self._enter(onion)
                try:
                    if onion.checks[0] is None:  # a real outermost layer: entered directly
                        self._pos = 0
                        await onion.fns[0](self, self._next)
                        if not self._called & 2 and not self._decided:
                            self._not_decided(0)
                    else:  # checks first, in line
                        await self._next()
                except TurnAbortedError:
                    raise
                except Exception as exc:
                    self._hook_failed(exc)
        except BaseException:  # an abort or a cancellation (everything else became a record)
            self._turn.keep_interrupted(self)  # its record: `abandon`
            raise
        return self._record(inline_limit)

    def _enter(self, onion: Onion) -> None:
        """Start the ``tool_call`` onion's run (`run` goes through it, outermost first).

        A layer that raises (or awaits ``call_next`` twice) fails the call, reported as a
        ``tool_call`` stage error; a layer that returns without ``call_next`` and without
        deciding (`deny`, `respond`) fails it with `PipelineShortCircuitedError`. Checks
        (one-argument hooks, `Onion.checks`) run in line, without a layer of their own.
        """
        self._onion = onion
        self._turn.staged.add(self.call_id)
        self._pos = -1
        self._called: int = 0
        self._failing: str | None = None
        self._locked = False
        self._vjson: dict[str, Any] | None = None

    async def _next(self) -> None:
        """The ``call_next`` of every layer: the checks in line, then the next layer or the centre.

        ``_pos`` is -1 before the outermost layer is entered; bit ``j`` of ``_called`` says
        that layer ``j - 1`` (bit 0: the run itself) went on.
        """
        i = self._pos
        j = i + 1
        onion = self._onion
        called = self._called
        if called & (1 << j):
            name = onion.names[i]
            raise NextCalledTwiceError(
                f"middleware {name!r} awaited call_next() twice", middleware=name
            )
        self._called = called | (1 << j)
        checks = onion.runs[j]  # the checks up to the next real layer, in line
        if checks:
            try:
                for check in checks:
                    if self._decided:
                        break  # a check decided: the rest are skipped
                    self._pos = j
                    result = check(self)
                    if result is not None and isawaitable(result):
                        await result
                    j += 1
            except Exception:
                if self._failing is None:  # the check the exception left
                    self._failing = onion.names[self._pos]
                raise
            finally:
                self._pos = i
        if j > onion.last or self._decided:
            await self._handle()
            return
        self._pos = j
        try:
            await onion.fns[j](self, self._next)
        except Exception:
            if self._failing is None:  # the innermost layer the exception left
                self._failing = onion.names[j]
            raise
        finally:
            self._pos = i
        if not self._called & (2 << j) and not self._decided:
            self._not_decided(j)

    def _not_decided(self, j: int) -> None:
        """Layer ``j`` returned without going on and without deciding: the call fails."""
        name = self._onion.names[j]
        error = PipelineShortCircuitedError(
            f"tool_call middleware {name!r} returned without call_next(), deny() or respond()",
            stage="tool_call",
            middleware=name,
        )
        self._turn.report(error, "tool_call")
        self._fail(name, error)

    def _hook_failed(self, exc: Exception) -> None:
        name = self._failing or self._onion.names[max(self._pos, 0)]
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

    def _refuse_unparsed(
        self, shown: str, error: InvalidToolArgsError, arguments: object
    ) -> ToolCall:
        """The record of a call whose arguments are unusable as given.

        ``args`` is ``{}``; text the model sent is kept as it sent it (``unparsed_args``), so
        the next request shows the model what it really sent.
        """
        self._unparsed = arguments if isinstance(arguments, str) else None
        self._raw_args = self._model_args = NO_ARGS
        self.checksum = tool_call_checksum(shown, NO_ARGS)
        return self._refused(ARGUMENTS, "invalid", error)

    def _not_offered(self, registry: ToolRegistry) -> ToolCall:
        """The record of a call to a name that is not among the visible tools."""
        name, shown = self.tool_name, self._shown
        available = ", ".join(t.name for t in registry.visible()) or "(none)"
        taken = self._turn.taken_tools.get(name) if name else None
        if taken is None:
            what = f"unknown tool {shown!r}" if name else "the call names no tool"
            error: LoopError = ToolNotFoundError(
                f"{what}; available tools: {available}", tool_name=shown
            )
            return self._refused(REGISTRY, "invalid", error, what)
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
        if self._decided:
            return
        if self._decisions is not None and self._locked and self._changed_since_approval():
            return
        self.ran = True
        start = perf_counter()
        try:
            self._output = await self._tool.run(
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

    def _changed_since_approval(self) -> bool:
        """Fail the call when its arguments no longer read as the approver saw them.

        `replace_args` is refused after an approval; this catches the arguments changed in
        place (``ctx.args.cents = ...``) by a hook, before or after the approver looked.
        """
        if self._tool.dump_args(self._args) == self._approved:
            return False
        name = self._tool.name
        error = ArgumentsLockedError(
            f"the arguments of the call to {name!r} changed after they were approved; "
            "it was not run",
            tool_name=name,
            call_id=self.call_id,
        )
        self._fail("loopware.approval", error)
        return True

    def _fail(self, layer: str, error: LoopError) -> None:
        """A layer raised or did not decide: the call fails with ``error``."""
        self._output = NOTHING
        self._decided = True
        self._decide(layer, "failed", error.message)
        self._message = f"Error: {error}"

    def abandon(self, reason: str, action: DecisionAction = "aborted") -> ToolCall:
        """The record of this call after something interrupted its run (the loop calls it).

        What the run did so far is kept (``ran``, its decisions, ``duration_ms``), with a
        decision of ``action`` (``"aborted"``: the turn's abort or a cancellation;
        ``"failed"``: an error elsewhere, e.g. in its parallel batch); the model reads that the
        turn was aborted (or the call did not complete) while, or before, the call ran.
        """
        self._output = NOTHING
        self._decide(_INTERRUPTER[action == "aborted"], action, reason)
        self._message = _interrupted_text(action, reason, self.ran)
        return self._record(0)

    def _record(self, inline_limit: int) -> ToolCall:
        """Build the call's record from the run (the only place the loop builds one)."""
        results: Any
        inline = from_artifact_tool = False
        is_error = True
        if self._message is not None:
            results = self._message
        elif self.error is not None and self._output is NOTHING:
            results = f"Error: {self.error}"
        else:
            outcome = outcome_of(self._tool, self._output, inline_limit, self._turn, self.call_id)
            if isinstance(outcome, str):
                results = outcome
            else:
                results, inline, from_artifact_tool = outcome
                is_error = False
        decisions = self._decisions
        return build_record(  # positionally: the hot path (see the parameters' names there)
            self.call_id,
            self._shown,  # the name as the record keeps it (cut short when it is no tool's)
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
            self._unparsed,
        )


_INTERRUPTER: Final = ("loopware.executor", "loopware.turn")
"""Who decided an interrupted call: the turn (an abort, a cancellation) or its executor."""


def _interrupted_text(action: DecisionAction, reason: str, ran: bool) -> str:
    when = "while" if ran else "before"
    if action == "aborted":
        return f"Error: the turn was aborted {when} this call ran."
    return f"Error: the call did not complete ({reason}); it was interrupted {when} it ran."


def interrupted_record(
    call_id: str, name: str, *, action: DecisionAction, reason: str
) -> ToolCall:
    """The record of a call interrupted before its run started (its handler never ran)."""
    text = _interrupted_text(action, reason, False)
    policy = _INTERRUPTER[action == "aborted"]
    return unrun_record(call_id, name, policy=policy, action=action, reason=reason, text=text)


def unrun_record(
    call_id: str, name: str, *, policy: str, action: DecisionAction, reason: str, text: str
) -> ToolCall:
    """The record of a call that was answered without a run (the model reads ``text``)."""
    given: object = name
    shown = (shown_name(name) if isinstance(given, str) else "") or UNNAMED
    decision = Decision(policy=policy, action=action, reason=reason)
    checksum = tool_call_checksum(shown, NO_ARGS)
    return build_record(call_id, shown, NO_ARGS, checksum, text, True, decisions=(decision,))
