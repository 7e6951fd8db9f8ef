"""Recording a policy decision: in the stash under ``<namespace>.decisions`` and as a Log event.

Every built-in policy that takes a decision about a call (hide, refuse, warn) records it as a
``{"tool", "checksum", "call_id", "iteration", "action", "reason"}`` entry in the stash and emits
a ``policy.decision`` `Log` (info) whose payload also carries ``policy``, which is what an audit
log reads. ``call_id`` names the exact call decided (None for a decision about a tool, not a
call): two identical calls of one batch share a checksum, and only their ids tell their
decisions apart.
"""

from __future__ import annotations

from typing import Any, Literal

from pipeline import DispatchContext, ToolCallContext, TurnContext

__all__ = ["Action", "deny_call", "record_decision"]

Action = Literal["allowed", "hidden", "denied", "approved", "rejected", "warned"]
"""What a policy did about a call."""


def record_decision(
    ctx: TurnContext | DispatchContext | ToolCallContext,
    namespace: str,
    *,
    tool: str | None,
    checksum: str | None,
    call_id: str | None,
    action: Action,
    reason: str,
    log: bool = True,
) -> None:
    """Append a decision to ``<namespace>.decisions`` and emit it as a ``policy.decision`` log.

    ``log=False`` skips the log: a ``tool_call`` hook's ``ctx.deny(reason, policy=...)`` emits
    it for the exact call (with ``call_id`` and whether the handler ran).
    """
    iteration = ctx.iteration if isinstance(ctx, DispatchContext | ToolCallContext) else None
    entry: dict[str, Any] = {
        "tool": tool,
        "checksum": checksum,
        "call_id": call_id,
        "iteration": iteration,
        "action": action,
        "reason": reason,
    }
    ctx.stash.append(f"{namespace}.decisions", entry)
    if not log:
        return
    ctx.log.info(
        "policy.decision",
        f"{namespace}: {action} {tool or 'dispatch'}: {reason}",
        policy=namespace,
        tool=tool,
        checksum=checksum,
        call_id=call_id,
        iteration=iteration,
        action=action,
        reason=reason,
    )


def deny_call(
    ctx: ToolCallContext,
    namespace: str,
    reason: str,
    *,
    message: str,
    action: Literal["denied", "rejected"] = "denied",
) -> None:
    """Refuse the call a ``tool_call`` hook holds: record it in the stash, then ``ctx.deny``.

    The stash gets the decision with this call's id; ``ctx.deny`` emits the one
    ``policy.decision`` log (with ``ran``) and the model reads ``Error: <message>``.
    """
    record_decision(
        ctx,
        namespace,
        tool=ctx.tool_name,
        checksum=ctx.checksum,
        call_id=ctx.call_id,
        action=action,
        reason=reason,
        log=False,
    )
    ctx.deny(reason, policy=namespace, action=action, message=message)
