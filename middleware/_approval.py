"""`ApprovalGate`: matching tools wait for an approval before their handler runs (DESIGN 9)."""

from __future__ import annotations

import asyncio
import inspect
import math
import os
from collections.abc import Awaitable, Callable, Collection
from fnmatch import fnmatchcase
from typing import TypeAlias

from pipeline import (
    Gate,
    GateAbortedError,
    GateTimeoutError,
    InvalidMiddlewareConfigError,
    LoopError,
    PolicyViolationError,
    ToolCallContext,
    ToolCallNext,
    TurnAbortedError,
)

from ._decisions import Action, deny_call, record_decision
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

    Who decides:

    * ``approver(gate)`` when given (sync or async): ``True`` approves, ``False`` rejects,
      ``None`` leaves the gate open for someone else, an exception rejects;
    * otherwise (or after ``None``) anyone holding the gate: a ``runner.on(GateOpened, ...)``
      listener calling ``gate.resolve(True | False)`` or ``gate.reject(reason)``.

    Outcomes: approval runs the handler. Rejection denies the call (the handler never runs) with
    a `PolicyViolationError` message (``policy`` is the namespace) the model reads as an error
    result; a timeout denies it with the `GateTimeoutError` message; aborting the gate with the
    `GateAbortedError` one; aborting the turn ends the turn as aborted. Each outcome is
    recorded as an ``approved`` or ``rejected`` decision under ``<namespace>.decisions`` and as
    a ``policy.decision`` log carrying the call id.
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

    @tool_call(order=-50)
    async def approve(self, ctx: ToolCallContext, call_next: ToolCallNext) -> None:
        """Hold a matching call at a gate until it is approved; run it only then."""
        name = ctx.tool_name
        if not self.matches(name):
            await call_next()
            return
        checksum = ctx.checksum
        args = ctx.args
        dump = getattr(args, "model_dump", None)
        from pydantic import StrictBool  # lazily: docs/architecture.md, "Import time"

        gate: Gate[bool] = Gate(
            id=f"{self._namespace}:{name}:{ctx.call_id}:{os.urandom(4).hex()}",
            reason=f"the call to {name!r} needs approval",
            payload={
                "tool": name,
                "call_id": ctx.call_id,
                "args": dump(mode="json") if callable(dump) else dict(ctx.raw_args),
                "raw_args": dict(ctx.raw_args),
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
            self._reject(ctx, exc.message, self._refusal(name, checksum, gate, exc.message))
            return
        except GateTimeoutError as exc:
            self._reject(ctx, "approval timed out", exc)
            return
        except GateAbortedError as exc:
            if ctx.dispatch.aborted:  # the turn's abort aborted the gate: end the turn
                self._decide(ctx, "rejected", exc.message)
                raise TurnAbortedError(ctx.dispatch.abort_reason, gate_id=gate.id) from exc
            self._reject(ctx, exc.message, exc)
            return
        except TurnAbortedError:
            self._decide(ctx, "rejected", "the turn was aborted")
            raise
        except LoopError as exc:  # rejected with a custom error: the model reads its message
            self._reject(ctx, exc.message, exc)
            return
        finally:
            if asking is not None and not asking.done():
                asking.cancel()
        if approved is not True:
            reason = f"the call to {name!r} was not approved"
            self._reject(ctx, reason, self._refusal(name, checksum, gate, reason))
            return
        self._decide(ctx, "approved", "approved")
        await call_next()

    def _reject(self, ctx: ToolCallContext, reason: str, error: LoopError) -> None:
        """Record the rejection and deny the call: the model reads ``error``'s message."""
        deny_call(ctx, self._namespace, reason, message=str(error), action="rejected")

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

    def _decide(self, ctx: ToolCallContext, action: Action, reason: str) -> None:
        record_decision(
            ctx,
            self._namespace,
            tool=ctx.tool_name,
            checksum=ctx.checksum,
            call_id=ctx.call_id,
            action=action,
            reason=reason,
        )


ApprovalGate.__module__ = "middleware"
