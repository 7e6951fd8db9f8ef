"""Deferred calls: a hosted call stopped at its approval gate so that the host pauses its run.

Hosts pause a run for a human's approval in their own way (pydantic-ai's ``ApprovalRequired``,
LangGraph's ``interrupt()``, the OpenAI Agents SDK's ``needs_approval``, ADK's
``request_confirmation``) and resume it later, maybe in another process, by running the
pre-handler hook of the same call id again with the decision. A hosted turn maps that onto
`middleware.ApprovalGate`:

* a call that carries the host's decision, or may be deferred, watches its own stage's gates
  (`pipeline._gate.GATE_WATCHER`, set around its run by `HostedTurn.call`): it settles the gate
  with the host's decision, or defers the call (`HostedCall.gate_opened`);
* a deferred call's stage is cancelled (`until_decided`): the hooks unwind as for a call that
  never ran (``ToolCallLimit`` gives its slot back), and no record is stored, so the call's one
  decision, and its one audit row, is taken when the host resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..calls._toolcall import ToolCall

__all__ = ["until_decided"]


async def until_decided(
    run: Coroutine[Any, Any, ToolCall], parked: asyncio.Future[None]
) -> ToolCall | None:
    """The stage's record, or None once the call was deferred (its stage is then cancelled).

    The stage runs in a task of its own (created here, in the caller's context).
    """
    stage = asyncio.ensure_future(run)
    try:
        await asyncio.wait((stage, parked), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the host's task was cancelled: cancel the call's stage with it
        stage.cancel()
        raise
    if stage.done():
        return stage.result()
    stage.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await stage
    return None
