"""`ToolCallContext`: what a ``tool_call`` middleware sees of the one call it wraps.

The ``tool_call`` stage is an onion around each single tool execution (DESIGN 13, issue 11):
it runs after the arguments validated and before the handler, on the exact call (its provider id),
for every route a call can take (parallel batches, artifact query tools, custom executors). A
hook may deny the call, answer it without running the handler, replace its arguments, replace
its outcome, time it or wait on a gate. See ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._events import Log

if TYPE_CHECKING:
    from ._context import ContextLog
    from ._dispatch import DispatchContext
    from ._gate import Gate
    from ._registry import ToolRegistry
    from ._stash import Stash
    from ._tool import Tool, ToolOutput
    from ._toolcall import ToolCall

__all__ = ["ToolCallContext", "ToolCallNext"]

T = TypeVar("T")

ToolCallNext = Callable[[], Awaitable["ToolCall"]]
"""The ``call_next`` of a ``tool_call`` middleware: runs the rest of the onion and the handler
and returns the completed record (not yet stored)."""

_NO_RESPONSE: Any = object()


class ToolCallContext:
    """One tool call on its way to the handler: its id, tool, arguments and the turn around it.

    ``args`` are the validated arguments the handler will receive (defaults applied);
    ``raw_args`` are the arguments as the model sent them, which the ``checksum`` is computed
    over. Decide with `deny` or `respond`; both work before ``await call_next()`` (the handler
    never runs) or after it (the handler's outcome is replaced).
    """

    __slots__ = (
        "_args",
        "_denial",
        "_raw_args",
        "_response",
        "call_id",
        "checksum",
        "dispatch",
        "ran",
        "tool",
    )

    def __init__(
        self,
        dispatch: DispatchContext,
        tool: Tool[Any],
        call_id: str,
        raw_args: Mapping[str, Any],
        args: Any,
        checksum: str,
    ) -> None:
        """Describe one call (the loop builds these; tests use `pipeline.testing`)."""
        self.dispatch = dispatch
        """The dispatch the call belongs to (stash, registry, iteration, gates, log)."""
        self.tool = tool
        """The tool the call names."""
        self.call_id = call_id
        """The provider's id of the call: the id its record is stored under."""
        self.checksum = checksum
        """`tool_call_checksum` of the tool name and the raw arguments: what was asked."""
        self.ran = False
        """True once the handler was invoked for this call."""
        self._raw_args = raw_args
        self._args = args
        self._denial: str | None = None
        self._response: Any = _NO_RESPONSE

    def __repr__(self) -> str:
        """Show the call."""
        state = "denied" if self._denial is not None else "ran" if self.ran else "pending"
        return (
            f"ToolCallContext(call_id={self.call_id!r}, tool={self.tool.name!r}, "
            f"iteration={self.dispatch.iteration}, state={state})"
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

    def replace_args(self, raw_args: Mapping[str, Any]) -> None:
        """Replace the arguments the handler will receive; they are validated again here.

        The record keeps the model's own arguments and checksum (what was asked).

        Raises:
            InvalidToolArgsError: the new arguments fail the tool's schema (if the hook lets it
                propagate, the call becomes an error call the model reads).
        """
        validated = self.tool.validate_sync(raw_args)
        self._raw_args = raw_args
        self._args = validated

    # -- decisions -------------------------------------------------------------------------------
    @property
    def denied(self) -> str | None:
        """The reason given to `deny`, or None."""
        return self._denial

    @property
    def response(self) -> ToolOutput | None:
        """The output given to `respond`, or None."""
        return None if self._response is _NO_RESPONSE else self._response

    def deny(
        self,
        reason: str,
        *,
        policy: str = "tool_call",
        action: Literal["denied", "rejected"] = "denied",
        message: str | None = None,
    ) -> None:
        """Refuse the call: the model reads ``Error: <message or reason>``; no handler runs.

        Called after ``await call_next()``, it replaces the handler's outcome instead. The
        decision is recorded against this call id as a ``policy.decision`` log (``action`` as
        given, ``"rejected"`` for an approval said no; ``policy`` as given; ``reason``), which
        `middleware.AuditLog` writes to the call's row. ``message`` is what the model reads when
        it should say more than the recorded reason.
        """
        self._denial = reason if message is None else message
        self._response = _NO_RESPONSE
        d = self.dispatch
        if d.listening:
            d.emit(
                Log(
                    turn_id=d.turn_id,
                    level="info",
                    kind="policy.decision",
                    message=f"{policy}: {action} {self.tool.name}: {reason}",
                    payload={
                        "policy": policy,
                        "tool": self.tool.name,
                        "checksum": self.checksum,
                        "call_id": self.call_id,
                        "iteration": d.iteration,
                        "action": action,
                        "reason": reason,
                        "ran": self.ran,
                    },
                )
            )

    def respond(self, output: ToolOutput) -> None:
        """Answer the call with ``output`` as if the handler had returned it (a cached result).

        Before ``await call_next()`` the handler never runs; after it, the handler's outcome is
        replaced. Text is inlined or spooled like any handler's text.
        """
        self._response = output
        self._denial = None

    # -- the turn around it ------------------------------------------------------------------
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


ToolCallContext.__module__ = "pipeline"
