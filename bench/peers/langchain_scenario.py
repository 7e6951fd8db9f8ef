"""The scenario on LangChain 1.x: ``create_agent`` with ``AgentMiddleware`` layers.

Run with the interpreter of ``bench/peers/.venvs/langchain``. Prints one JSON line.

- Fake model: a ``BaseChatModel`` subclass with a native async ``_agenerate`` (so LangChain does
  not push it to a thread) and a ``bind_tools`` that returns the model (it has no wire to render
  tools for). It reads the id of the latest ``ToolMessage`` to pick the next call.
- Layers: one ``AgentMiddleware`` subclass per layer, each overriding ``awrap_tool_call`` (the
  tool-call interception point, composed first-listed-outermost like loopware's onion). The
  deny-list layer checks before calling the handler; the others act on the ``ToolMessage``.
- ``recursion_limit`` is raised because LangGraph counts model and tool nodes as separate steps
  (20 iterations are 41 steps; its default limit is 25).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import version
from typing import Any

from _scenario import (
    ARGS,
    ECHO,
    FINAL_TEXT,
    ITERATIONS,
    Config,
    Layers,
    call_id,
    emit,
    iteration_after,
    measure,
    run_main,
)
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

LAYERS = Layers()
Handler = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


class ScriptedChatModel(BaseChatModel):
    """Proposes ``echo`` calls until ITERATIONS tool results exist, then answers FINAL_TEXT."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        last = messages[-1]
        k = iteration_after(last.tool_call_id if isinstance(last, ToolMessage) else None)
        if k < ITERATIONS:
            msg = AIMessage(
                content="",
                tool_calls=[{"name": "echo", "args": dict(ARGS[k % 3]), "id": call_id(k)}],
            )
        else:
            msg = AIMessage(content=FINAL_TEXT)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer(messages)


class CountLayer(AgentMiddleware):
    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        result = await handler(request)
        LAYERS.count(request.tool_call["name"])
        return result


class RepetitionLayer(AgentMiddleware):
    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        result = await handler(request)
        call = request.tool_call
        LAYERS.repetition(call["name"], call["args"])
        return result


class AuditLayer(AgentMiddleware):
    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        result = await handler(request)
        call = request.tool_call
        content = result.content if isinstance(result, ToolMessage) else result
        LAYERS.record(call["name"], call["args"], content)
        return result


class DenyLayer(AgentMiddleware):
    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        LAYERS.deny(request.tool_call["name"])
        return await handler(request)


class PassLayer(AgentMiddleware):
    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Any:
        return await handler(request)


async def build(n_layers: int) -> Config:
    middleware = (
        [CountLayer(), RepetitionLayer(), AuditLayer(), DenyLayer(), PassLayer()]
        if n_layers
        else []
    )
    agent = create_agent(model=ScriptedChatModel(), tools=[tool(ECHO)], middleware=middleware)
    config: Any = {"recursion_limit": 100}

    async def run_turn() -> Any:
        out = await agent.ainvoke({"messages": [HumanMessage("go")]}, config=config)
        return out["messages"][-1].content

    return Config(run_turn)


async def main() -> None:
    samples = await measure(build, LAYERS)
    emit(
        "langchain",
        f"langchain {version('langchain')} / core {version('langchain-core')} / "
        f"langgraph {version('langgraph')}",
        samples,
        "create_agent + AgentMiddleware.awrap_tool_call per layer",
    )


if __name__ == "__main__":
    run_main(main)
