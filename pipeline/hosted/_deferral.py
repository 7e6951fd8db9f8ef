"""Deferred calls: a hosted call stopped at its approval gate so that the host pauses its run.

Hosts pause a run for a human's approval in their own way (pydantic-ai's ``ApprovalRequired``,
LangGraph's ``interrupt()``, the OpenAI Agents SDK's ``needs_approval``, ADK's
``request_confirmation``) and resume it later, maybe in another process, by running the
pre-handler hook of the same call id again with the decision. A hosted turn maps that onto
`middleware.ApprovalGate`:

* the runner's `GateOpened` listener (`on_gate_opened`) finds the call whose stage opened the
  gate (the `HostedCall` of the running context) and lets it settle the gate with the host's
  decision, or defer it (`HostedCall.gate_opened`);
* a deferred call's stage is cancelled (`until_decided`): the hooks unwind as for a call that
  never ran (``ToolCallLimit`` gives its slot back), and no record is stored, so the call's one
  decision, and its one audit row, is taken when the host resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from ._tools import CURRENT

if TYPE_CHECKING:
    from .._events import GateOpened
    from ..calls._toolcall import ToolCall

__all__ = ["on_gate_opened", "until_decided"]


def on_gate_opened(event: GateOpened) -> None:
    """Hand a gate opened by a hosted call's stage to that call (`HostedCall.gate_opened`)."""
    call = CURRENT.get()
    if call is not None:
        call.gate_opened(event.gate)


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
