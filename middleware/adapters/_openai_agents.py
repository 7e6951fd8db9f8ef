"""`Loopware`: loopware's stack on an OpenAI Agents SDK run (docs/adapters.md).

The SDK has no run-wide tool hook, so the adapter wraps the agent's function tools and runs the
agent itself: `Loopware.run` begins a hosted turn (`pipeline.hosted`), runs
``Runner.run`` on a copy of the agent whose `FunctionTool`s are wrapped (`wrap_tools`), and
finishes the turn. A wrapped tool's ``on_invoke_tool`` runs the ``tool_call`` stage on
``ToolContext.tool_call_id``; a refused call returns loopware's text (the model reads it as the
tool's output, the SDK's way of reporting a failed call); its ``is_enabled`` closes the previous
step's batch and leaves out the tools loopware hid or withdrew.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, RunResult

from pipeline.hosted import HostedRunner, HostedTurn, HostTool

if TYPE_CHECKING:
    from agents.tool_context import ToolContext

    from pipeline.stores import TurnStore

__all__ = ["Loopware"]

_ACTIVE: Final[contextvars.ContextVar[HostedTurn | None]] = contextvars.ContextVar(
    "loopware_openai_agents_turn", default=None
)
"""The turn of the run whose tools are being called (set by `Loopware.run`)."""


class Loopware:
    """Enforce a loopware middleware stack on an OpenAI Agents SDK agent's tool calls.

    Example::

        loopware = Loopware(middleware=[ToolPolicy(deny=["shell*"]), ToolCallLimit({"search": 3})])
        result = await loopware.run(agent, "find things")

    Args:
        middleware: The same list ``TurnRunner(middleware=[...])`` takes.
        store: Where turns and calls are kept (default: in memory); ``conversation_id`` given to
            `run` is the loopware conversation.
    """

    __slots__ = ("_hosted",)

    def __init__(
        self, *, middleware: Sequence[object] = (), store: TurnStore | None = None
    ) -> None:
        """Compose the stack once (every run shares it)."""
        self._hosted = HostedRunner(middleware=middleware, store=store)

    def __repr__(self) -> str:
        """Show the stack."""
        return f"Loopware({self._hosted!r})"

    @property
    def hosted(self) -> HostedRunner:
        """The loopware stack (subscribe to its events with ``hosted.runner.on(...)``)."""
        return self._hosted

    def wrap_tools(self, tools: Sequence[Any]) -> list[Any]:
        """The tools with each `FunctionTool` wrapped (others unchanged).

        A wrapped tool goes through loopware only inside `run`; called elsewhere it runs as
        it was.
        """
        return [_wrapped(t) if isinstance(t, FunctionTool) else t for t in tools]

    async def run(
        self,
        agent: Agent[Any],
        input: str,
        *,
        conversation_id: str | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """Run ``agent`` on ``input`` as one loopware turn (``Runner.run`` underneath).

        Args:
            agent: The agent; its function tools are wrapped on a copy (the agent is unchanged).
            input: The user input.
            conversation_id: The loopware conversation (earlier turns' calls count).
            **kwargs: Passed on to ``Runner.run`` (``context``, ``max_turns``, ``run_config``).
                Without a ``run_config``, the run gets one whose ``tool_not_found_behavior`` is
                ``"return_error_to_model"``: a call to a tool loopware hid then reads an error
                instead of failing the run (give your own ``run_config`` to decide otherwise).

        Raises:
            Exception: whatever ``Runner.run`` raises (the turn is aborted and finished first).
        """
        turn = await self._hosted.begin(input, conversation_id=conversation_id)
        turn.offer(_described(t) for t in agent.tools if isinstance(t, FunctionTool))
        token = _ACTIVE.set(turn)
        try:
            wrapped = agent.clone(tools=self.wrap_tools(agent.tools))
            if "run_config" not in kwargs:
                kwargs["run_config"] = RunConfig(tool_not_found_behavior="return_error_to_model")
            result = await Runner.run(wrapped, input, **kwargs)
        except BaseException as exc:
            turn.abort(f"the agent run raised {type(exc).__name__}")
            await turn.finish()
            raise
        finally:
            _ACTIVE.reset(token)
        await turn.finish()
        return result


def _described(tool: FunctionTool) -> HostTool:
    return HostTool(tool.name, tool.description, tool.params_json_schema)


def _wrapped(tool: FunctionTool) -> FunctionTool:
    """A copy of ``tool`` whose calls and visibility loopware decides."""
    invoke = tool.on_invoke_tool
    enabled = tool.is_enabled
    name = tool.name
    defaults = _defaults(tool.params_json_schema)

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> Any:
        turn = _ACTIVE.get()
        if turn is None:
            return await invoke(ctx, arguments)

        async def centre(args: dict[str, Any]) -> object:
            return await invoke(ctx, json.dumps(args) if args != validated else arguments)

        validated = _validated(arguments, defaults)
        hosted = await turn.call(ctx.tool_call_id, name, arguments, centre, validated=validated)
        if hosted.forwarded:
            return hosted.value
        if hosted.raises and hosted.host_error is not None:
            raise hosted.host_error
        return hosted.text

    async def is_enabled(run: RunContextWrapper[Any], agent: Any) -> bool:
        turn = _ACTIVE.get()
        if turn is not None:
            await turn.end_batch()  # the tools are prepared for the next model call
            if name in turn.hidden():
                return False
        if callable(enabled):
            answer = enabled(run, agent)
            return bool(await answer) if inspect.isawaitable(answer) else bool(answer)
        return bool(enabled)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool, is_enabled=is_enabled)


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        key: sub["default"]
        for key, sub in properties.items()
        if isinstance(sub, dict) and "default" in sub
    }


def _validated(arguments: str, defaults: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments with the schema's top-level defaults filled in (what repetition compares)."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    return {**defaults, **parsed}


Loopware.__module__ = "middleware.adapters.openai_agents"
