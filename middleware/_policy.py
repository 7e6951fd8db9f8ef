"""`ToolPolicy`: allow and deny lists of tool-name globs."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from fnmatch import fnmatchcase
from typing import Any

from pipeline import DispatchContext, Tool, TurnContext
from pipeline.calls import ToolCall, ToolCallContext, ToolDecision
from pipeline.errors import PolicyViolationError

from ._options import check_names, check_namespace
from ._registration import dispatch_output, tool_call, turn_input, turn_output

__all__ = ["ToolPolicy"]

_UNSEEN = object()
_MAX_VERDICTS = 4096


class ToolPolicy:
    """Keep denied tools away from the model, and refuse any call that reaches one.

    Patterns are globs matched case-sensitively (`fnmatch.fnmatchcase`): ``"shell*"``,
    ``"fs_?"``, ``"[ab]_tool"``. A tool is permitted when it matches no ``deny`` pattern and,
    if ``allow`` is given, at least one ``allow`` pattern (``allow=None`` permits everything not
    denied).

    * turn input: every tool not permitted is unregistered from the turn's registry (the
      runner's baseline is untouched), so the model is never offered it; each removal is a
      ``"withdrawn"`` `ToolDecision`, so a call that names the tool anyway reads that this
      policy withdrew it and why (``E_TOOL_UNAVAILABLE``);
    * later in the turn: the same check guards the turn's registry (`ToolRegistry.restrict`),
      so tools registered afterwards (forged artifact tools, tools added by other middleware)
      are refused as they arrive, and recorded the same way;
    * each call (the ``tool_call`` stage, outermost): a call to a tool not permitted is denied
      before its handler runs, on its call id, whatever route it took (a registry replaced with
      ``ctx.tools = ...``, a tool renamed or registered later);
    * dispatch output: a stored call to a tool that is not permitted that did not pass the
      stage (a custom executor's own record) and ran bypassed the policy: the dispatch is
      nacked with `PolicyViolationError`;
    * turn output: the same for calls stored after the last dispatch output (an executor that
      stored calls and acked in one invocation); the dispatch is already acked, so a denied
      tool that ran fails the turn with `PolicyViolationError`.

    Args:
        allow: Patterns of tools permitted, or None for all.
        deny: Patterns of tools refused; deny wins over allow.
        namespace: The policy's name in decisions (default ``loopware.policy``).

    Raises:
        InvalidMiddlewareConfigError: a pattern list is a bare string or holds a non-string or
            empty pattern, or the namespace is not a stash path.
    """

    __slots__ = ("_allow", "_deny", "_namespace", "_verdicts")

    def __init__(
        self,
        allow: Collection[str] | None = None,
        deny: Collection[str] = (),
        *,
        namespace: str = "loopware.policy",
    ) -> None:
        """Configure the policy (see the class docstring)."""
        owner = "ToolPolicy"
        self._allow = None if allow is None else check_names(owner, "allow", allow)
        self._deny = check_names(owner, "deny", deny)
        self._namespace = check_namespace(owner, namespace)
        # a memo of a pure function of the tool name (not turn state): a bounded cache
        self._verdicts: dict[str, str | None] = {}

    def __repr__(self) -> str:
        """Show the configuration."""
        allow = None if self._allow is None else list(self._allow)
        return (
            f"ToolPolicy(allow={allow!r}, deny={list(self._deny)!r}, namespace={self._namespace!r})"
        )

    @property
    def allow(self) -> tuple[str, ...] | None:
        """Patterns of tools permitted (None: all not denied)."""
        return self._allow

    @property
    def deny(self) -> tuple[str, ...]:
        """Patterns of tools refused."""
        return self._deny

    @property
    def namespace(self) -> str:
        """The policy's name in the decisions it takes."""
        return self._namespace

    def refusal(self, tool: str) -> str | None:
        """Return why ``tool`` is not permitted, or None when it is."""
        verdict = self._verdicts.get(tool, _UNSEEN)
        if verdict is _UNSEEN:
            verdict = self._judge(tool)
            if len(self._verdicts) >= _MAX_VERDICTS:
                self._verdicts.clear()
            self._verdicts[tool] = verdict
        return verdict  # type: ignore[return-value]  # _UNSEEN was replaced just above

    def _judge(self, tool: str) -> str | None:
        for pattern in self._deny:
            if fnmatchcase(tool, pattern):
                return f"matches deny pattern {pattern!r}"
        if self._allow is not None and not any(fnmatchcase(tool, p) for p in self._allow):
            return "matches no allow pattern"
        return None

    @turn_input
    def restrict(self, ctx: TurnContext) -> None:
        """Remove every tool the policy does not permit, now and for the rest of the turn.

        The check is installed on the turn's registry (`ToolRegistry.restrict`), so tools
        registered later in the turn (forged artifact tools, tools added by other middleware)
        are refused as they arrive: no per-iteration work.
        """

        def admit(tool: Tool[Any]) -> bool:
            reason = self.refusal(tool.name)
            if reason is None:
                return True
            ctx.decide_tool(
                ToolDecision(
                    tool=tool.name, policy=self._namespace, action="withdrawn", reason=reason
                )
            )
            return False

        ctx.tools.restrict(admit)

    @tool_call(order=-110)
    def deny_call(self, ctx: ToolCallContext) -> None:
        """Deny, before it runs, a call to a tool the policy does not permit.

        Admission checks keep denied tools out of the registry; this catches what slips past
        them (a tool put back by ``ctx.tools = ...``, a registry edited by other middleware).
        A check (a one-argument hook): the call crosses no layer of its own.
        """
        reason = self.refusal(ctx.tool_name)
        if reason is not None:
            ctx.deny(reason, policy=self._namespace)

    @dispatch_output
    def enforce(self, ctx: DispatchContext) -> None:
        """Nack when a stored call to a tool not permitted ran (from any executor).

        Calls the ``tool_call`` stage denied never ran; this catches records stored without
        passing the stage (a custom executor's own records).
        """
        self._enforce(ctx, ctx.unseen_tool_calls(self))

    @turn_output
    def enforce_late(self, ctx: TurnContext) -> None:
        """Check calls stored after the last ``dispatch_output`` (an acking executor's).

        Raises:
            PolicyViolationError: one of them is a call to a tool not permitted that ran.
        """
        self._enforce(ctx, ctx.unseen_tool_calls(self))

    def _enforce(self, ctx: TurnContext | DispatchContext, calls: Sequence[ToolCall]) -> None:
        """Nack (or fail the turn) when a stored call to a tool not permitted ran."""
        crossed = ctx.crossed_tool_call_stage
        for call in calls:
            if not call.ran or crossed(call.id):
                continue  # nothing ran, or it ran past this policy's own check (`deny_call`)
            reason = self.refusal(call.tool)
            if reason is None:
                continue
            violation = PolicyViolationError(
                f"{self._namespace}: {call.tool} {reason}; the call ran despite the policy",
                policy=self._namespace,
                details={
                    "tool": call.tool,
                    "checksum": call.checksum,
                    "call_id": call.id,
                    "reason": reason,
                },
            )
            if not isinstance(ctx, DispatchContext):
                raise violation  # after the dispatch (turn output): fail the turn
            if not ctx.is_signalled:
                ctx.nack(violation)
            return


ToolPolicy.__module__ = "middleware"
