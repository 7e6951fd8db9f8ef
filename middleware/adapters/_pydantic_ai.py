"""`LoopwareCapability`: loopware's stack as a pydantic-ai capability.

The guide: docs/adapters/pydantic-ai.md.

One pydantic-ai run is one hosted turn (`pipeline.hosted`): ``wrap_run`` begins and finishes
it, ``prepare_tools`` (once per step, before the model call) closes the previous step's batch
(``dispatch_output``) and offers the agent's tools, ``before_model_request`` leaves the ones
loopware hid or withdrew out of what the model is shown (they stay registered, so a call made
anyway reaches loopware and is refused with an audit row), and
``wrap_tool_execute`` runs each call through the ``tool_call`` stage on its
``tool_call_id``, pydantic-ai's validated arguments (defaults applied) being what the hooks
read. A refused call raises ``ToolFailed`` (the model reads why; no retry budget is spent).

With ``defer_approvals=True`` an `middleware.ApprovalGate` maps onto pydantic-ai's deferred
tools: a gated call raises ``ApprovalRequired`` (the run ends with ``DeferredToolRequests``,
whose ``metadata[call_id]["loopware"]`` holds the stash as plain data), and the run resumed
with ``DeferredToolResults`` (any process; pass the requests' ``metadata`` back) decides it:
approved, the call passes the stage once more with the gate settled (one limit slot, one
repetition count, one stored record); denied, pydantic-ai answers it and loopware records it
as rejected at the run's end (its handler never runs).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import ToolCallPart, ToolReturnPart

from pipeline.hosted import HostedRunner, HostedTurn, HostTool

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities.abstract import WrapRunHandler, WrapToolExecuteHandler
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition

    from pipeline.stores import TurnStore

__all__ = ["LoopwareCapability"]

_KEY = "loopware"
"""The key of loopware's plain-data state in a deferred call's metadata."""


@dataclass(kw_only=True)
class LoopwareCapability(AbstractCapability[Any]):
    """Enforce a loopware middleware stack on a pydantic-ai agent's tool calls.

    Example::

        agent = Agent(model, capabilities=[LoopwareCapability(middleware=[
            ToolPolicy(deny=["shell*"]), ToolCallLimit({"search": 3}), RepetitionDetector(),
        ])])

    Args:
        middleware: The same list ``TurnRunner(middleware=[...])`` takes.
        store: Where turns and calls are kept. Given one, the run's ``conversation_id`` is the
            loopware conversation (earlier runs' calls count for repetition); without one,
            each run is a turn of its own and nothing outlives it.
        defer_approvals: Pause the run at an `middleware.ApprovalGate` (``ApprovalRequired``)
            instead of waiting in the process; the agent's ``output_type`` must then include
            ``DeferredToolRequests`` (see the module docstring).
    """

    middleware: Sequence[object] = ()
    """The loopware middleware, as a `TurnRunner` takes them."""
    store: TurnStore | None = None
    """Where turns and calls are kept (default: in memory)."""
    defer_approvals: bool = False
    """Whether a call at an approval gate defers the run (``ApprovalRequired``)."""
    _hosted: HostedRunner = field(init=False, repr=False, compare=False)
    _turn: HostedTurn | None = field(default=None, init=False, repr=False, compare=False)
    _parked: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _restored: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Compose the stack once (every run shares it)."""
        self._hosted = HostedRunner(middleware=self.middleware, store=self.store)

    @property
    def hosted(self) -> HostedRunner:
        """The loopware stack (subscribe to its events with ``hosted.runner.on(...)``)."""
        return self._hosted

    @property
    def turn(self) -> HostedTurn | None:
        """The run's loopware turn (on the per-run copy, while the run goes on)."""
        return self._turn

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        """A per-run copy: each run is its own loopware turn over the shared stack."""
        run = copy.copy(self)
        run._turn = None
        run._parked = []
        run._restored = False
        return run

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Begin the run's turn, run, and finish the turn (aborted if the run fails)."""
        prompt = ctx.prompt if isinstance(ctx.prompt, str) else ""
        # pydantic-ai gives every run a conversation id; the default in-memory store would keep
        # every one of them, so runs share a conversation only in a store the user gave
        conversation = ctx.conversation_id if self.store is not None else None
        turn = self._turn = await self._hosted.begin(prompt, conversation_id=conversation)
        try:
            result = await handler()
        except BaseException as exc:
            turn.abort(f"the pydantic-ai run raised {type(exc).__name__}")
            await turn.finish()
            raise
        await self._record_denied(turn, result)
        for metadata in self._parked:  # the stash as the run leaves it
            metadata[_KEY] = {"stash": turn.snapshot()}
        await turn.finish()
        return result

    async def _record_denied(self, turn: HostedTurn, result: AgentRunResult[Any]) -> None:
        """Record the deferred calls pydantic-ai answered as denied (they never reach a hook)."""
        if not self.defer_approvals:
            return
        denied = [
            part.tool_call_id
            for message in result.new_messages()
            for part in message.parts
            if isinstance(part, ToolReturnPart)
            and part.outcome == "denied"
            and turn.get(part.tool_call_id) is None
        ]
        if not denied:
            return
        calls = {
            part.tool_call_id: part
            for message in result.all_messages()
            for part in message.parts
            if isinstance(part, ToolCallPart)
        }
        await turn.end_batch()
        for call_id in denied:
            call = calls.get(call_id)
            if call is not None:
                raw = call.args if call.args is not None else {}
                await turn.call(call_id, call.tool_name, raw, _never_runs, approval=False)

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """Offer the step's tools to loopware (the previous step's batch is closed first).

        Its ``dispatch_output`` may hide a tool: `before_model_request` leaves it out.

        Raises:
            LoopError: a policy ended the turn (a nack) or it was aborted: the run ends here,
                before the model is asked again (`HostedTurn.before_model`).
        """
        turn = self._turn
        if turn is None:
            return tool_defs
        await turn.before_model()
        turn.offer(
            HostTool(t.name, t.description, t.parameters_json_schema)
            for t in tool_defs
            if not turn.knows(t.name)
        )
        return tool_defs  # hidden ones stay known to pydantic-ai (`before_model_request`)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Leave the tools loopware hid or withdrew out of what the model is shown.

        They stay registered with pydantic-ai, so a call to one made anyway reaches
        `wrap_tool_execute`, and loopware refuses it with an audit row (pydantic-ai would
        answer a call to a tool it does not know itself).
        """
        turn = self._turn
        if turn is None:
            return request_context
        hidden = turn.hidden()
        parameters = request_context.model_request_parameters
        if not hidden or not any(t.name in hidden for t in parameters.function_tools):
            return request_context
        shown = [t for t in parameters.function_tools if t.name not in hidden]
        request_context.model_request_parameters = dataclasses.replace(
            parameters, function_tools=shown
        )
        return request_context

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Run the call through loopware's ``tool_call`` stage on its ``tool_call_id``.

        Raises:
            ToolFailed: loopware refused the call (the model reads why).
        """
        turn = self._turn
        if turn is None:
            return await handler(args)
        raw = call.args if call.args is not None else {}
        approval: bool | None = None
        if self.defer_approvals and ctx.tool_call_approved:
            approval = True
            self._restore(turn, ctx.tool_call_metadata)
        hosted = await turn.call(
            call.tool_call_id,
            call.tool_name,
            raw,
            handler,
            validated=args,
            approval=approval,
            defer=self.defer_approvals,
        )
        if hosted.deferred:
            metadata: dict[str, Any] = {_KEY: {"stash": turn.snapshot()}}
            self._parked.append(metadata)
            raise ApprovalRequired(metadata=metadata)
        if hosted.forwarded:
            return hosted.value
        if hosted.raises and hosted.host_error is not None:
            raise hosted.host_error
        raise ToolFailed(hosted.text)

    def _restore(self, turn: HostedTurn, metadata: object) -> None:
        """Restore the stash the paused run wrote into the call's metadata (once per run)."""
        if self._restored or not isinstance(metadata, dict):
            return
        state = metadata.get(_KEY)
        if isinstance(state, dict) and isinstance(state.get("stash"), dict):
            turn.restore(state["stash"])
            self._restored = True


async def _never_runs(args: dict[str, Any]) -> object:
    """The centre of a call pydantic-ai denied: a rejected call never reaches it."""
    raise RuntimeError("a call denied by pydantic-ai does not run")


LoopwareCapability.__module__ = "middleware.adapters.pydantic_ai"
