"""`ApprovalGate`: matching tools wait for an approval before their handler runs (DESIGN 9)."""

from __future__ import annotations

import asyncio
import inspect
import math
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from fnmatch import fnmatchcase
from typing import Any, TypeAlias

from pydantic import StrictBool

from pipeline import (
    CallNext,
    DispatchContext,
    Gate,
    GateAbortedError,
    GateTimeoutError,
    InvalidMiddlewareConfigError,
    LoopError,
    PolicyViolationError,
    ToolGuard,
    TurnAbortedError,
    TurnContext,
    tool_call_checksum,
)

from ._decisions import Action, record_decision
from ._options import check_names, check_namespace
from ._registration import turn_input

__all__ = ["ApprovalGate", "Approver"]

Approver: TypeAlias = Callable[[Gate], "bool | Awaitable[bool | None] | None"]
"""Decides a gate: ``True`` approves, ``False`` rejects, ``None`` leaves it to someone else
(a `GateOpened` listener, a UI holding the gate). Sync or async; an exception rejects."""


class ApprovalGate:
    """Calls to matching tools wait for approval through ``ctx.wait_for(gate)``.

    In the turn input stage every tool of the turn's registry whose name matches one of
    ``tools`` (globs, `fnmatch.fnmatchcase`) is replaced, in that turn's registry only, by a
    copy guarded by `Tool.with_guard`: after its arguments validate and before its handler
    runs, a `Gate` opens with ``payload={"tool", "args", "checksum", "iteration"}`` and
    ``schema=StrictBool``. Tools registered after the turn input stage are not guarded.

    Who decides:

    * ``approver(gate)`` when given (sync or async): ``True`` approves, ``False`` rejects,
      ``None`` leaves the gate open for someone else, an exception rejects;
    * otherwise (or after ``None``) anyone holding the gate: a ``runner.on(GateOpened, ...)``
      listener calling ``gate.resolve(True | False)`` or ``gate.reject(reason)``.

    Outcomes: approval runs the handler. Rejection fails the call with a `PolicyViolationError`
    (``policy`` is the namespace) whose message the model reads as an error result; a timeout
    fails it with `GateTimeoutError`; aborting the gate fails it with `GateAbortedError`;
    aborting the turn ends the turn as aborted. Each outcome is recorded as an ``approved`` or
    ``rejected`` decision under ``<namespace>.decisions`` and as a ``policy.decision`` log.
    A gate that is never settled holds only its own turn.

    Args:
        tools: Glob patterns of the tools that need approval.
        approver: Decides each gate (see above); ``None`` leaves gates to listeners.
        timeout: Seconds a gate waits before the call fails; ``None`` waits until the turn ends.
        namespace: The stash path of its decisions.

    Raises:
        InvalidMiddlewareConfigError: no pattern, a bad pattern, a non-callable approver, a
            timeout that is not a positive number, or a bad namespace.
    """

    __slots__ = ("_approver", "_namespace", "_timeout", "_tools")

    def __init__(
        self,
        tools: Collection[str],
        approver: Approver | None = None,
        *,
        timeout: float | None = None,
        namespace: str = "loopware.approval",
    ) -> None:
        """Configure the gate (see the class docstring)."""
        owner = "ApprovalGate"
        self._tools = check_names(owner, "tools", tools)
        if not self._tools:
            raise InvalidMiddlewareConfigError(
                f"{owner}: tools must name at least one pattern", option="tools"
            )
        if approver is not None and not callable(approver):
            raise InvalidMiddlewareConfigError(
                f"{owner}: approver must be a callable or None, got {approver!r}", option="approver"
            )
        limit: object = timeout
        if limit is not None and (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or not math.isfinite(limit)
            or limit <= 0
        ):
            raise InvalidMiddlewareConfigError(
                f"{owner}: timeout must be a positive number of seconds or None, got {timeout!r}",
                option="timeout",
            )
        self._approver = approver
        self._timeout = timeout
        self._namespace = check_namespace(owner, namespace)

    def __repr__(self) -> str:
        """Show the configuration."""
        return (
            f"ApprovalGate(tools={list(self._tools)!r}, approver={self._approver!r}, "
            f"timeout={self._timeout!r}, namespace={self._namespace!r})"
        )

    @property
    def tools(self) -> tuple[str, ...]:
        """The patterns of tools that need approval."""
        return self._tools

    @property
    def namespace(self) -> str:
        """The stash path of its decisions."""
        return self._namespace

    def matches(self, tool: str) -> bool:
        """Return whether calls to ``tool`` need approval."""
        return any(fnmatchcase(tool, pattern) for pattern in self._tools)

    @turn_input
    async def guard_tools(self, ctx: TurnContext, call_next: CallNext) -> None:
        """Replace every matching tool of the turn's registry with its guarded copy."""
        registry = ctx.tools
        for tool in registry.all():
            if self.matches(tool.name):
                registry.register(tool.with_guard(self._guard_for(tool.name)), overwrite=True)
        await call_next()

    def _guard_for(self, name: str) -> ToolGuard:
        async def guard(args: Mapping[str, Any], ctx: DispatchContext) -> None:
            await self._approve(name, args, ctx)

        return guard

    async def _approve(self, name: str, args: Mapping[str, Any], ctx: DispatchContext) -> None:
        checksum = tool_call_checksum(name, args)
        gate = Gate(
            id=f"{self._namespace}:{name}:{uuid.uuid4().hex}",
            reason=f"the call to {name!r} needs approval",
            payload={
                "tool": name,
                "args": dict(args),
                "checksum": checksum,
                "iteration": ctx.iteration,
            },
            schema=StrictBool,
            timeout=self._timeout,
        )
        asking = None if self._approver is None else asyncio.ensure_future(self._ask(gate))
        try:
            approved = await ctx.wait_for(gate)
        except PolicyViolationError as exc:  # rejected with text or by the approver
            self._decide(ctx, name, checksum, "rejected", exc.message)
            raise self._refusal(name, checksum, gate, exc.message) from exc
        except GateTimeoutError:
            self._decide(ctx, name, checksum, "rejected", "approval timed out")
            raise
        except GateAbortedError as exc:
            self._decide(ctx, name, checksum, "rejected", exc.message)
            if ctx.aborted:  # the turn's abort aborted the gate: end the turn, not just the call
                raise TurnAbortedError(ctx.abort_reason, gate_id=gate.id) from exc
            raise
        except TurnAbortedError:
            self._decide(ctx, name, checksum, "rejected", "the turn was aborted")
            raise
        except LoopError as exc:  # rejected with a custom error: the model reads its message
            self._decide(ctx, name, checksum, "rejected", exc.message)
            raise
        finally:
            if asking is not None and not asking.done():
                asking.cancel()
        if approved is not True:
            reason = f"the call to {name!r} was not approved"
            self._decide(ctx, name, checksum, "rejected", reason)
            raise self._refusal(name, checksum, gate, reason)
        self._decide(ctx, name, checksum, "approved", "approved")

    async def _ask(self, gate: Gate) -> None:
        approver = self._approver
        assert approver is not None
        try:
            verdict: object = approver(gate)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            gate.reject(exc)
            return
        if verdict is True:
            gate.resolve(True)
        elif verdict is False:
            gate.reject(f"the call to {gate.payload['tool']!r} was rejected by the approver")
        elif verdict is not None:
            gate.reject(f"the approver returned {verdict!r}, not True, False or None")

    def _refusal(self, name: str, checksum: str, gate: Gate, reason: str) -> PolicyViolationError:
        return PolicyViolationError(
            reason,
            policy=self._namespace,
            details={"tool": name, "checksum": checksum, "gate_id": gate.id},
        )

    def _decide(
        self, ctx: DispatchContext, name: str, checksum: str, action: Action, reason: str
    ) -> None:
        record_decision(
            ctx,
            self._namespace,
            tool=name,
            checksum=checksum,
            call_id=None,
            action=action,
            reason=reason,
        )


ApprovalGate.__module__ = "middleware"
