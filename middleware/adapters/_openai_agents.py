"""`Loopware`: loopware's stack on an OpenAI Agents SDK run (docs/adapters/openai-agents.md).

The SDK has no run-wide tool hook, so the adapter wraps the agent's function tools and runs the
agent itself: `Loopware.run` begins a hosted turn (`pipeline.hosted`), runs
``Runner.run`` on a copy of the agent whose `FunctionTool`s are wrapped (`wrap_tools`), and
finishes the turn. A wrapped tool's ``on_invoke_tool`` runs the ``tool_call`` stage on
``ToolContext.tool_call_id``; a refused call returns loopware's text (the model reads it as the
tool's output, the SDK's way of reporting a failed call); its ``is_enabled`` closes the previous
step's batch, and the agent's model is shown only the tools loopware did not hide or withdraw
(`ShownTools`: they stay known to the run, so a call made anyway reaches loopware and is
refused with an audit row).

With ``defer_approvals=True`` an `middleware.ApprovalGate` maps onto the SDK's
``needs_approval``: a wrapped tool the gate matches asks for approval (`Loopware.needs_approval`),
the run stops with ``interruptions``, and ``result.to_state().to_json()`` carries loopware's
stash as plain data in the run's context mapping (under ``"loopware"``; the run's ``context``
must be a dict). Resumed in any process (the state loaded with
``RunState.from_json(loopware.agent(agent), data)``, then `Loopware.run` with the state as input),
an approved call passes the stage once, its gate settled by the approval; a rejected one is
answered by the SDK and recorded by loopware as rejected (it never runs).
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import json
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, RunResult, RunState
from agents.models.interface import Model
from agents.models.multi_provider import MultiProvider

from middleware import ApprovalGate
from pipeline.hosted import HostedRunner, HostedTurn, HostTool

from ._openai_agents_model import ShownTools

if TYPE_CHECKING:
    from agents.tool_context import ToolContext

    from pipeline.stores import TurnStore

__all__ = ["Loopware"]

NeedsApproval = Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]
"""The SDK's per-call ``needs_approval`` policy: (run context, arguments, call id) -> bool."""

_WRAPPED: Final[weakref.WeakSet[Any]] = weakref.WeakSet()
"""The ``on_invoke_tool`` functions of wrapped tools (a tool is wrapped once)."""
_KEY: Final = "loopware"
"""The key of loopware's plain-data state in the run's context mapping."""


class _Run:
    """One `Loopware.run`: its turn, and whether a resumed run restored its stash yet."""

    __slots__ = ("defer", "restored", "turn")

    def __init__(self, turn: HostedTurn, defer: bool) -> None:
        self.turn = turn
        self.defer = defer
        self.restored = False


_ACTIVE: Final[contextvars.ContextVar[_Run | None]] = contextvars.ContextVar(
    "loopware_openai_agents_turn", default=None
)
"""The run whose tools are being called (set by `Loopware.run`)."""


class Loopware:
    """Enforce a loopware middleware stack on an OpenAI Agents SDK agent's tool calls.

    Example::

        loopware = Loopware(middleware=[ToolPolicy(deny=["shell*"]), ToolCallLimit({"search": 3})])
        result = await loopware.run(agent, "find things")

    Args:
        middleware: The same list ``TurnRunner(middleware=[...])`` takes.
        store: Where turns and calls are kept (default: in memory); ``conversation_id`` given to
            `run` is the loopware conversation.
        defer_approvals: Map the stack's `middleware.ApprovalGate` gates onto the SDK's
            ``needs_approval`` (the run pauses; see the module docstring).
    """

    __slots__ = ("_defer", "_gates", "_hosted")

    def __init__(
        self,
        *,
        middleware: Sequence[object] = (),
        store: TurnStore | None = None,
        defer_approvals: bool = False,
    ) -> None:
        """Compose the stack once (every run shares it)."""
        self._hosted = HostedRunner(middleware=middleware, store=store)
        self._defer = defer_approvals
        self._gates = tuple(m for m in middleware if isinstance(m, ApprovalGate))

    def __repr__(self) -> str:
        """Show the stack."""
        return f"Loopware({self._hosted!r})"

    @property
    def defers(self) -> bool:
        """Whether approval gates pause the run (``defer_approvals``)."""
        return self._defer

    @property
    def hosted(self) -> HostedRunner:
        """The loopware stack (subscribe to its events with ``hosted.runner.on(...)``)."""
        return self._hosted

    def wrap_tools(self, tools: Sequence[Any]) -> list[Any]:
        """The tools with each `FunctionTool` wrapped (others unchanged).

        A wrapped tool goes through loopware only inside `run`; called elsewhere it runs as
        it was.
        """
        return [
            _wrapped(t, self)
            if isinstance(t, FunctionTool) and t.on_invoke_tool not in _WRAPPED
            else t
            for t in tools
        ]

    def agent(self, agent: Agent[Any], run_config: RunConfig | None = None) -> Agent[Any]:
        """A copy of ``agent`` with its function tools wrapped (tools already wrapped stay).

        Its model (resolved through ``run_config``'s provider when it is a name) is shown only
        the tools loopware did not hide (`ShownTools`). Load a paused run's state with it,
        ``RunState.from_json(loopware.agent(agent), data)``: the SDK resumes on the state's own
        agent, whose tools must go through loopware.
        """
        tools = self.wrap_tools(agent.tools)
        model = agent.model
        if isinstance(model, ShownTools):
            return agent.clone(tools=tools)
        if not isinstance(model, Model):
            provider = run_config.model_provider if run_config is not None else MultiProvider()
            model = provider.get_model(model)
        return agent.clone(tools=tools, model=ShownTools(model, _hidden))

    def needs_approval(self, tool: str) -> NeedsApproval:
        """The ``needs_approval`` policy of the tool named ``tool``.

        A call pauses for approval when an `ApprovalGate` of the stack matches the tool and no
        decision was given for its call id yet. `wrap_tools` sets it on each wrapped tool when
        ``defer_approvals`` is on.
        """
        matched = any(gate.matches(tool) for gate in self._gates)

        async def needs(run: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            return matched and run.is_tool_approved(tool, call_id) is None

        return needs

    async def run(
        self,
        agent: Agent[Any],
        input: str | RunState[Any, Any],
        *,
        conversation_id: str | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """Run ``agent`` on ``input`` as one loopware turn (``Runner.run`` underneath).

        Args:
            agent: The agent; its function tools are wrapped on a copy (the agent is unchanged).
            input: The user input, or a ``RunState`` to resume (after an approval).
            conversation_id: The loopware conversation (earlier turns' calls count).
            **kwargs: Passed on to ``Runner.run`` (``context``, ``max_turns``, ``run_config``).
                Without a ``run_config``, the run gets one whose ``tool_not_found_behavior`` is
                ``"return_error_to_model"``: a call to a tool loopware hid then reads an error
                instead of failing the run (give your own ``run_config`` to decide otherwise).

        Raises:
            Exception: whatever ``Runner.run`` raises (the turn is aborted and finished first).
        """
        prompt = input if isinstance(input, str) else ""
        turn = await self._hosted.begin(prompt, conversation_id=conversation_id)
        turn.offer(_described(t) for t in agent.tools if isinstance(t, FunctionTool))
        token = _ACTIVE.set(_Run(turn, self._defer))
        try:
            if "run_config" not in kwargs:
                kwargs["run_config"] = RunConfig(tool_not_found_behavior="return_error_to_model")
            wrapped = self.agent(agent, kwargs["run_config"])
            result = await Runner.run(wrapped, input, **kwargs)
            if self._defer:
                await _record_rejected(turn, result)
        except BaseException as exc:
            turn.abort(f"the agent run raised {type(exc).__name__}")
            await turn.finish()
            raise
        finally:
            _ACTIVE.reset(token)
        context = result.context_wrapper.context
        if self._defer and result.interruptions and isinstance(context, dict):
            context[_KEY] = {"stash": turn.snapshot()}  # into the RunState's JSON
        await turn.finish()
        return result


async def _record_rejected(turn: HostedTurn, result: RunResult) -> None:
    """Record the calls the SDK answered as rejected (they never reach ``on_invoke_tool``)."""
    wrapper = result.context_wrapper
    outputs = {
        _field(item.raw_item, "call_id")
        for item in result.new_items
        if getattr(item, "type", None) == "tool_call_output_item"
    }
    for item in result.new_items:
        raw = getattr(item, "raw_item", None)
        if getattr(item, "type", None) != "tool_call_item" or raw is None:
            continue
        call_id = _field(raw, "call_id")
        name = _field(raw, "name")
        if not isinstance(call_id, str) or not isinstance(name, str) or call_id not in outputs:
            continue
        if turn.get(call_id) is None and wrapper.is_tool_approved(name, call_id) is False:
            arguments = _field(raw, "arguments") or ""
            await turn.call(call_id, name, arguments, _never_runs, approval=False)


def _field(raw: object, key: str) -> str | None:
    """A string field of an SDK item's raw item (a dict or a pydantic model)."""
    value = raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)
    return value if isinstance(value, str) else None


async def _never_runs(args: dict[str, Any]) -> object:
    """The centre of a call the SDK rejected: a rejected call never reaches it."""
    raise RuntimeError("a call rejected by the SDK does not run")


def _hidden() -> frozenset[str]:
    """The tools the running turn hid or withdrew (none outside `Loopware.run`)."""
    run = _ACTIVE.get()
    return frozenset() if run is None else run.turn.hidden()


def _described(tool: FunctionTool) -> HostTool:
    return HostTool(tool.name, tool.description, tool.params_json_schema)


def _wrapped(tool: FunctionTool, owner: Loopware) -> FunctionTool:
    """A copy of ``tool`` whose calls and visibility loopware decides."""
    invoke = tool.on_invoke_tool
    enabled = tool.is_enabled
    name = tool.name
    defaults = _defaults(tool.params_json_schema)

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> Any:
        run = _ACTIVE.get()
        if run is None:
            return await invoke(ctx, arguments)
        turn = run.turn
        approval: bool | None = None
        if run.defer:
            approval = ctx.is_tool_approved(name, ctx.tool_call_id)
            if approval is not None:
                _restore(run, ctx.context)

        async def centre(args: dict[str, Any]) -> object:
            return await invoke(ctx, json.dumps(args) if args != validated else arguments)

        parsed = _parsed(arguments)  # parsed once: the seam takes the object as it is
        validated = None if parsed is None else {**defaults, **parsed}
        hosted = await turn.call(
            ctx.tool_call_id,
            name,
            arguments if parsed is None else parsed,
            centre,
            validated=validated,
            approval=approval,
        )
        if hosted.forwarded:
            return hosted.value
        if hosted.raises and hosted.host_error is not None:
            raise hosted.host_error
        return hosted.text

    async def is_enabled(run: RunContextWrapper[Any], agent: Any) -> bool:
        active = _ACTIVE.get()
        if active is not None:
            turn = active.turn
            await turn.before_model()  # the tools are prepared for the next model call
            # a hidden tool stays enabled (known to the run): `ShownTools` hides it from the model
        if callable(enabled):
            answer = enabled(run, agent)
            return bool(await answer) if inspect.isawaitable(answer) else bool(answer)
        return bool(enabled)

    _WRAPPED.add(on_invoke_tool)
    if not owner.defers:
        return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool, is_enabled=is_enabled)
    return dataclasses.replace(
        tool,
        on_invoke_tool=on_invoke_tool,
        is_enabled=is_enabled,
        needs_approval=owner.needs_approval(name),
    )


def _restore(run: _Run, context: object) -> None:
    """Restore the stash the paused run wrote into the context mapping (once per run)."""
    if run.restored or not isinstance(context, dict):
        return
    state = context.get(_KEY)
    if isinstance(state, dict) and isinstance(state.get("stash"), dict):
        run.turn.restore(state["stash"])
        run.restored = True


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        key: sub["default"]
        for key, sub in properties.items()
        if isinstance(sub, dict) and "default" in sub
    }


def _parsed(arguments: str) -> dict[str, Any] | None:
    """The model's arguments as a JSON object, or None when they are not one.

    Their validation, for the hooks, is this with the schema's top-level defaults filled in
    (what repetition compares); text that is not an object goes to loopware as it came, whose
    parser refuses it with the usual message.
    """
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


Loopware.__module__ = "middleware.adapters.openai_agents"
