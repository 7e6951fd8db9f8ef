"""`LoopwarePlugin`: loopware's stack as a Google ADK plugin (docs/adapters/adk.md).

One ADK invocation is one hosted turn (`pipeline.hosted`), keyed by its ``invocation_id``:
``before_run_callback`` begins it (the session is the conversation), ``before_model_callback``
closes the previous step's batch and takes the tools loopware hid or withdrew out of the
request, ``after_run_callback`` finishes it.

ADK has no hook around a tool, only before and after it, so a call's ``tool_call`` stage spans
both: ``before_tool_callback`` starts the call's run on ``tool_context.function_call_id`` and
waits until the stage either decides (the refusal is returned as the tool's response, and ADK
skips the tool) or reaches its centre (it returns None, with any replaced arguments edited into
``tool_args``, and ADK runs the tool); ``after_tool_callback`` (or ``on_tool_error_callback``)
hands the tool's outcome to the waiting centre and returns what the stage made of it. A plugin
that answers skips every later plugin: register this one first.

With ``defer_approvals=True`` an `middleware.ApprovalGate` maps onto ADK's tool confirmation: a
gated call defers (`pipeline.hosted`: nothing runs, nothing is stored), the plugin calls
``tool_context.request_confirmation`` and writes the stash as plain data into the session state
(``state["loopware"]``), and the invocation pauses. Resumed with the confirmation's function
response in any process sharing the session store, ADK runs ``before_tool_callback`` again with
``tool_context.tool_confirmation``: the stash is restored and the call is decided once,
``confirmed`` settling its gate (a rejected call never runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from pipeline.errors import LoopError
from pipeline.hosted import HostedCall, HostedRunner, HostedTurn, HostTool

if TYPE_CHECKING:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext

    from pipeline.stores import TurnStore

__all__ = ["LoopwarePlugin"]

_KEY = "loopware"
"""The session state key of loopware's plain-data state (the stash of a paused invocation)."""


class _Pending:
    """A call whose stage reached its centre: ADK runs the tool, then hands over its outcome."""

    __slots__ = ("outcome", "run")

    def __init__(self, run: asyncio.Task[HostedCall], outcome: asyncio.Future[object]) -> None:
        self.run = run
        self.outcome = outcome


class LoopwarePlugin(BasePlugin):
    """Enforce a loopware middleware stack on a Google ADK runner's tool calls.

    Example::

        runner = InMemoryRunner(agent=agent, plugins=[LoopwarePlugin(middleware=[
            ToolPolicy(deny=["shell*"]), ToolCallLimit({"search": 3}), RepetitionDetector(),
        ])])

    Args:
        middleware: The same list ``TurnRunner(middleware=[...])`` takes.
        store: Where turns and calls are kept. Given one, the ADK session is the loopware
            conversation (earlier invocations' calls count for repetition); without one, each
            invocation is a turn of its own and nothing outlives it.
        name: The plugin's name (ADK's plugin registry).
        defer_approvals: Pause the invocation at an `middleware.ApprovalGate` with
            ``request_confirmation`` (see the module docstring).
    """

    def __init__(
        self,
        *,
        middleware: Sequence[object] = (),
        store: TurnStore | None = None,
        name: str = "loopware",
        defer_approvals: bool = False,
    ) -> None:
        """Compose the stack once (every invocation shares it)."""
        super().__init__(name=name)
        self._hosted = HostedRunner(middleware=middleware, store=store)
        self._defer = defer_approvals
        self._restored: set[str] = set()  # invocations whose stash a resumed call restored
        self._keeps = store is not None
        self._turns: dict[str, HostedTurn] = {}
        self._pending: dict[str, _Pending] = {}

    @property
    def hosted(self) -> HostedRunner:
        """The loopware stack (subscribe to its events with ``hosted.runner.on(...)``)."""
        return self._hosted

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> Any:
        """Begin the invocation's turn (the session is the conversation, given a store)."""
        content = invocation_context.user_content
        parts = content.parts if content is not None and content.parts else []
        text = "".join(part.text or "" for part in parts)
        # every invocation has a session; the default in-memory store would keep every one
        conversation = invocation_context.session.id if self._keeps else None
        turn = await self._hosted.begin(text, conversation_id=conversation)
        self._turns[invocation_context.invocation_id] = turn
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        """Finish the invocation's turn (``turn_output``)."""
        turn = self._turns.pop(invocation_context.invocation_id, None)
        self._restored.discard(invocation_context.invocation_id)
        if turn is not None:
            await turn.finish()

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Close the previous step's batch; offer the tools; take the hidden ones out.

        When a policy ended the turn (a nack) or it was aborted, the model is not asked again:
        the step is answered with an ``LlmResponse`` whose ``error_code`` and ``error_message``
        are the loopware error's (ADK's own way for a model step that failed), and the run
        ends (`HostedTurn.before_model`).
        """
        turn = self._turns.get(callback_context.invocation_id)
        if turn is None:
            return None
        try:
            await turn.before_model()
        except LoopError as exc:
            return LlmResponse(error_code=exc.code, error_message=str(exc), turn_complete=True)
        declarations = _declared(llm_request)
        declared = [f for tool in declarations for f in (tool.function_declarations or [])]
        turn.offer(
            HostTool(str(f.name), f.description, _schema(f))
            for f in declared
            if f.name and not turn.knows(f.name)
        )
        hidden = turn.hidden()
        if hidden:
            for name in hidden:
                llm_request.tools_dict.pop(name, None)
            for tool in declarations:
                if tool.function_declarations:
                    tool.function_declarations = [
                        f for f in tool.function_declarations if f.name not in hidden
                    ]
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Run the call's ``tool_call`` stage up to its centre; refuse it, or let ADK run it."""
        turn = self._turns.get(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if turn is None or call_id is None:
            return None
        loop = asyncio.get_running_loop()
        entered: asyncio.Future[None] = loop.create_future()  # the centre, or the stage's end
        outcome: asyncio.Future[object] = loop.create_future()
        reached: list[bool] = []

        async def centre(args: dict[str, Any]) -> object:
            if args != tool_args:  # a hook replaced them: ADK runs the tool with these
                tool_args.clear()
                tool_args.update(args)
            reached.append(True)
            _settle(entered)
            return await outcome

        approval = self._approval(turn, tool_context)
        validated = _validated(tool, tool_args)
        run = asyncio.ensure_future(
            turn.call(
                call_id,
                tool.name,
                dict(tool_args),
                centre,
                validated=validated,
                approval=approval,
                defer=self._defer,
            )
        )
        run.add_done_callback(lambda _: _settle(entered))
        await entered
        if not reached:  # decided before the centre: ADK skips the tool
            hosted = run.result()
            return _paused(turn, hosted, tool_context) if hosted.deferred else _refusal(hosted)
        self._pending[call_id] = _Pending(run, outcome)
        return None

    def _approval(self, turn: HostedTurn, tool_context: ToolContext) -> bool | None:
        """The confirmation of a resumed call (restoring the paused invocation's stash once)."""
        confirmation = tool_context.tool_confirmation
        if not self._defer or confirmation is None:
            return None
        invocation = tool_context.invocation_id
        saved = tool_context.state.get(_KEY)
        if invocation not in self._restored and isinstance(saved, dict):
            stash = saved.get("stash")
            if isinstance(stash, dict):
                turn.restore(stash)
            self._restored.add(invocation)
        return confirmation.confirmed is True

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Hand the tool's result to its stage; keep it, or return what replaced it."""
        pending = self._pending.pop(tool_context.function_call_id or "", None)
        if pending is None:
            return None
        pending.outcome.set_result(result)
        hosted = await pending.run
        return None if hosted.forwarded else _refusal(hosted)

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """Hand the tool's error to its stage; let it stand, or return what replaced it."""
        pending = self._pending.pop(tool_context.function_call_id or "", None)
        if pending is None:
            return None
        pending.outcome.set_exception(error)
        hosted = await pending.run
        return None if hosted.raises else _refusal(hosted)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _declared(llm_request: LlmRequest) -> list[types.Tool]:
    """The request's function-declaring tools (genai ``Tool`` values)."""
    return [t for t in (llm_request.config.tools or []) if isinstance(t, types.Tool)]


def _refusal(hosted: HostedCall) -> dict[str, Any]:
    return {"error": hosted.text}


def _paused(turn: HostedTurn, hosted: HostedCall, tool_context: ToolContext) -> dict[str, Any]:
    """Ask ADK for the call's confirmation; keep the stash in the session state."""
    tool_context.request_confirmation(
        hint=f"loopware: the call to {hosted.name!r} needs approval",
        payload={"loopware": "approval", "call_id": hosted.call_id, "tool": hosted.name},
    )
    tool_context.actions.skip_summarization = True  # the pause is not a result to summarize
    tool_context.state[_KEY] = {"stash": turn.snapshot()}
    return {"error": "This tool call requires confirmation, please approve or reject."}


def _schema(declaration: Any) -> dict[str, Any] | None:
    """A function declaration's parameters as JSON Schema (None: any object)."""
    schema = getattr(declaration, "parameters_json_schema", None)
    if isinstance(schema, dict):
        return schema
    parameters = getattr(declaration, "parameters", None)
    dump = getattr(parameters, "json_schema", None)
    if dump is not None:
        try:
            dumped = dump.model_dump(mode="json", exclude_none=True)
        except Exception:  # a schema genai cannot render: any object
            return None
        if isinstance(dumped, dict):
            for key in ("type",):
                value = dumped.get(key)
                if isinstance(value, str):
                    dumped[key] = value.lower()
            return dumped
    return None


_DEFAULTS: weakref.WeakKeyDictionary[Any, tuple[tuple[str, object], ...] | None] = (
    weakref.WeakKeyDictionary()
)
"""Per tool function, its plain defaults (`_defaults`): read once, not per call."""


def _defaults(func: Any) -> tuple[tuple[str, object], ...] | None:
    """The function's parameters with a plain default (None: no signature to read)."""
    with contextlib.suppress(TypeError):  # unhashable: read every time
        if func in _DEFAULTS:  # (one that cannot be weakly referenced is never in it)
            return _DEFAULTS[func]
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        found = None
    else:
        found = tuple(
            (name, p.default)
            for name, p in parameters.items()
            if name != "tool_context"
            and p.default is not inspect.Parameter.empty
            and (p.default is None or isinstance(p.default, bool | int | float | str))
        )
    with contextlib.suppress(TypeError):  # not weakly referenceable, or unhashable
        _DEFAULTS[func] = found
    return found


def _validated(tool: BaseTool, args: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments with the function's own defaults filled in (what repetition compares)."""
    func = getattr(tool, "func", None)
    if func is None:
        return None
    defaults = _defaults(func)
    if defaults is None:
        return None
    filled = dict(args)
    for name, default in defaults:
        if name not in filled:
            filled[name] = default
    return filled


LoopwarePlugin.__module__ = "middleware.adapters.adk"
