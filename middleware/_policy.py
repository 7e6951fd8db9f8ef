"""`ToolPolicy`: allow and deny lists of tool-name globs."""

from __future__ import annotations

from collections.abc import Collection
from fnmatch import fnmatchcase
from typing import Any

from pipeline import CallNext, DispatchContext, PolicyViolationError, Tool, TurnContext

from ._decisions import record_decision
from ._options import check_names, check_namespace
from ._registration import dispatch_output, turn_input

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
      runner's baseline is untouched), so the model is never offered it; each removal is
      recorded as a ``"denied"`` decision;
    * later in the turn: the same check guards the turn's registry (`ToolRegistry.restrict`),
      so tools registered afterwards (forged artifact tools, tools added by other middleware)
      are refused as they arrive, and recorded the same way;
    * dispatch output: a call to a tool that is not permitted is recorded as ``"denied"``; if
      it completed without error (the tool ran, so the policy was bypassed), the dispatch is
      nacked with `PolicyViolationError`. A call the executor already refused (an unknown tool
      is an error record the model sees) is recorded only.

    Args:
        allow: Patterns of tools permitted, or None for all.
        deny: Patterns of tools refused; deny wins over allow.
        namespace: The stash path of its decisions (default ``loopware.policy``).

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
        """The stash path of its decisions."""
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
    async def restrict(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Remove every tool the policy does not permit, now and for the rest of the turn.

        The check is installed on the turn's registry (`ToolRegistry.restrict`), so tools
        registered later in the turn (forged artifact tools, tools added by other middleware)
        are refused as they arrive: no per-iteration work.
        """

        def admit(tool: Tool[Any]) -> bool:
            reason = self.refusal(tool.name)
            if reason is None:
                return True
            record_decision(
                ctx,
                self._namespace,
                tool=tool.name,
                checksum=None,
                call_id=None,
                action="denied",
                reason=reason,
            )
            return False

        ctx.tools.restrict(admit)
        await call_next()

    @dispatch_output
    async def enforce(self, ctx: DispatchContext, call_next: CallNext) -> None:
        """Record calls to tools not permitted; nack when one actually ran."""
        for call in ctx.new_tool_calls:
            reason = self.refusal(call.tool)
            if reason is None:
                continue
            ran = not call.is_error
            record_decision(
                ctx,
                self._namespace,
                tool=call.tool,
                checksum=call.checksum,
                call_id=call.id,
                action="denied",
                reason=reason if not ran else f"{reason}; the call ran despite the policy",
            )
            if ran and not ctx.is_signalled:
                ctx.nack(
                    PolicyViolationError(
                        f"policy: {call.tool} {reason}",
                        policy=self._namespace,
                        details={
                            "tool": call.tool,
                            "checksum": call.checksum,
                            "call_id": call.id,
                            "reason": reason,
                        },
                    )
                )
        await call_next()


ToolPolicy.__module__ = "middleware"
