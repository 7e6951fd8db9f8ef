"""`ApprovalGate`: matching tools wait for an approval before their handler runs."""

from __future__ import annotations

import asyncio
import inspect
import math
import os
from collections.abc import Awaitable, Callable, Collection
from fnmatch import fnmatchcase
from typing import TypeAlias

from pipeline import Gate
from pipeline.calls import ToolCallContext, ToolCallNext
from pipeline.errors import (
    GateAbortedError,
    InvalidMiddlewareConfigError,
    LoopError,
    PolicyViolationError,
    TurnAbortedError,
)

from ._options import check_names, check_namespace
from ._registration import tool_call

__all__ = ["ApprovalGate", "Approver"]

Approver: TypeAlias = Callable[[Gate], "bool | Awaitable[bool | None] | None"]
"""Decides a gate: ``True`` approves, ``False`` rejects, ``None`` leaves it to someone else
(a `GateOpened` listener, a UI holding the gate). Sync or async; an exception rejects."""


class ApprovalGate:
    """Calls to matching tools wait for approval through ``ctx.wait_for(gate)``.

    In the ``tool_call`` stage, every call to a tool whose name matches one of ``tools`` (globs,
    `fnmatch.fnmatchcase`), whenever the tool was registered, stops after its arguments
    validate and before its handler runs: a `Gate` opens with ``payload={"tool", "call_id",
    "args", "raw_args", "checksum", "iteration"}`` and ``schema=StrictBool``. ``args`` are the
    arguments the handler will run with (validated, defaults applied, as JSON data); each call
    of a batch waits on its own gate and is decided on its own call id.

    Approval is innermost: the hook is registered with ``order=1000``, after every built-in
    and every hook of the default order, so nothing runs between the approval and the
    handler; and an approved call's arguments are locked (`ToolCallContext.approve`): a hook
    ordered inside it that calls ``replace_args`` fails the call (``E_ARGS_LOCKED``) instead
    of running the handler on arguments the approver never saw.

    Who decides:

    * ``approver(gate)`` when given (sync or async): ``True`` approves, ``False`` rejects,
      ``None`` leaves the gate open for someone else, an exception rejects;
    * otherwise (or after ``None``) anyone holding the gate: a ``runner.on(GateOpened, ...)``
      listener calling ``gate.resolve(True | False)`` or ``gate.reject(reason)``.

    Outcomes: approval runs the handler. Rejection refuses the call (the handler never runs):
    the model reads ``E_CALL_REJECTED`` with the reason; a timeout and an aborted gate reject
    it the same way (the reason is the gate's error, ``E_TURN_GATE_TIMEOUT: ...`` or
    ``E_TURN_GATE_ABORTED: ...``); aborting the turn ends the turn as aborted. Each outcome is an
    ``"approved"`` or ``"rejected"`` `Decision` on the call's record, under ``namespace``.
    A gate that is never settled holds only its own turn.

    Args:
        tools: Glob patterns of the tools that need approval.
        approver: Decides each gate (see above); ``None`` leaves gates to listeners.
        timeout: Seconds a gate waits before the call fails; ``None`` waits until the turn ends.
        namespace: The policy's name in the decisions it takes.

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

    @tool_call(order=1000)
    async def approve(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        """Hold a matching call at a gate until it is approved; run it only then."""
        name = ctx.tool_name
        if not self.matches(name):
            await call_next()
            return
        from pydantic import StrictBool  # lazily: docs/architecture.md, "Import time"

        gate: Gate[bool] = Gate(
            id=f"{self._namespace}:{name}:{ctx.call_id}:{os.urandom(4).hex()}",
            reason=f"the call to {name!r} needs approval",
            payload={
                "tool": name,
                "call_id": ctx.call_id,
                "args": dict(ctx.validated_args),
                "raw_args": dict(ctx.raw_args),
                "checksum": ctx.checksum,
                "iteration": ctx.iteration,
            },
            schema=StrictBool,
            timeout=self._timeout,
        )
        asking = None if self._approver is None else asyncio.ensure_future(self._ask(gate))
        try:
            approved = await ctx.wait_for(gate)
        except GateAbortedError as exc:
            if ctx.dispatch.aborted:  # the turn's abort aborted the gate: end the turn
                raise TurnAbortedError(ctx.dispatch.abort_reason, gate_id=gate.id) from exc
            self._reject(ctx, str(exc))
            return
        except PolicyViolationError as exc:  # rejected with text (or by the approver)
            self._reject(ctx, exc.message)
            return
        except LoopError as exc:  # rejected with an error of its own: keep its code
            self._reject(ctx, str(exc))
            return
        finally:
            if asking is not None and not asking.done():
                asking.cancel()
        if approved is not True:
            self._reject(ctx, "the approver said no")
            return
        ctx.approve("approved", policy=self._namespace)
        await call_next()

    def _reject(self, ctx: ToolCallContext, reason: str) -> None:
        """Refuse the call as rejected: the model reads ``E_CALL_REJECTED`` and why."""
        ctx.deny(reason, policy=self._namespace, action="rejected")

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
            gate.reject("the approver said no")
        elif verdict is not None:
            gate.reject(f"the approver returned {verdict!r}, not True, False or None")


ApprovalGate.__module__ = "middleware"
