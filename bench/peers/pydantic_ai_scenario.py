"""The scenario on pydantic-ai: ``Agent`` + ``FunctionModel``, layers as capabilities.

Run with the interpreter of ``bench/peers/.venvs/pydantic_ai``. Prints one JSON line.

- Fake model: ``FunctionModel`` (pydantic_ai.models.function) with a function that reads the
  ``tool_call_id`` of the latest ``ToolReturnPart`` to pick the next call.
- Layers: pydantic-ai's middleware mechanism is the *capability* (``Agent(capabilities=[...])``,
  pydantic_ai.capabilities.AbstractCapability), whose tool-execution hooks
  (``before_tool_execute`` / ``after_tool_execute`` / ``wrap_tool_execute``) run per tool call. One
  ``AbstractCapability`` subclass per layer: the deny-list layer uses ``before_tool_execute``, the
  others ``after_tool_execute`` (they need the result; pydantic-ai hands them validated args).
"""

from __future__ import annotations

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
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

LAYERS = Layers()


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Propose ``echo`` calls until ITERATIONS tool results exist, then answer FINAL_TEXT."""
    last = messages[-1]
    last_id = None
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                last_id = part.tool_call_id
    k = iteration_after(last_id)
    if k < ITERATIONS:
        call = ToolCallPart("echo", dict(ARGS[k % 3]), tool_call_id=call_id(k))
        return ModelResponse(parts=[call])
    return ModelResponse(parts=[TextPart(FINAL_TEXT)])


class CountLayer(AbstractCapability[None]):
    async def after_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        LAYERS.count(call.tool_name)
        return result


class RepetitionLayer(AbstractCapability[None]):
    async def after_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        LAYERS.repetition(call.tool_name, args)
        return result


class AuditLayer(AbstractCapability[None]):
    async def after_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        LAYERS.record(call.tool_name, args, result)
        return result


class DenyLayer(AbstractCapability[None]):
    async def before_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:
        LAYERS.deny(call.tool_name)
        return args


class PassLayer(AbstractCapability[None]):
    async def after_tool_execute(
        self,
        ctx: RunContext[None],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        return result


async def build(n_layers: int) -> Config:
    capabilities: list[AbstractCapability[None]] = (
        [CountLayer(), RepetitionLayer(), AuditLayer(), DenyLayer(), PassLayer()]
        if n_layers
        else []
    )
    agent = Agent(FunctionModel(scripted), tools=[ECHO], capabilities=capabilities)

    async def run_turn() -> Any:
        return (await agent.run("go")).output

    return Config(run_turn)


async def main() -> None:
    samples = await measure(build, LAYERS)
    emit(
        "pydantic-ai",
        f"pydantic-ai-slim {version('pydantic-ai-slim')}",
        samples,
        "Agent + FunctionModel; one AbstractCapability per layer (before/after_tool_execute)",
    )


if __name__ == "__main__":
    run_main(main)
