"""The scenario on the OpenAI Agents SDK: ``Agent`` + ``Runner``, layers as tool guardrails.

Run with the interpreter of ``bench/peers/.venvs/openai_agents``. Prints one JSON line.

- Fake model: a ``Model`` subclass (``get_response``/``stream_response``) that reads the
  ``call_id`` of the latest ``function_call_output`` input item to pick the next call; output
  items are built with the SDK's own ``agents.testing.model`` helpers. Tracing is disabled.
- Layers: the SDK's per-tool-call middleware is the *tool guardrail*, kept as ordered lists on the
  function tool (``tool_input_guardrails`` / ``tool_output_guardrails``); ``RunHooks`` is a single
  object per run, not a list, so it cannot hold five independent layers without a hand-written
  composite. The deny-list layer is an input guardrail, the other four are output guardrails.
  The SDK hands guardrails the arguments as JSON text (``ToolContext.tool_arguments``), so the
  repetition and audit layers parse it: that parse is part of what this framework costs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

from _scenario import (
    ARGS_JSON,
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
from agents import (
    Agent,
    ModelResponse,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    Usage,
    function_tool,
    set_tracing_disabled,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.models.interface import Model
from agents.testing.model import assistant_message, function_call

LAYERS = Layers()
ALLOW = ToolGuardrailFunctionOutput.allow()


class ScriptedModel(Model):
    """Proposes ``echo`` calls until ITERATIONS tool results exist, then answers FINAL_TEXT."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        last_id = None
        if isinstance(input, list) and input:
            last = input[-1]
            if isinstance(last, dict) and last.get("type") == "function_call_output":
                last_id = last["call_id"]
        k = iteration_after(last_id)
        if k < ITERATIONS:
            item = function_call("echo", ARGS_JSON[k % 3], call_id=call_id(k))
        else:
            item = assistant_message(FINAL_TEXT)
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scenario does not stream")


@tool_output_guardrail
def count_layer(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    LAYERS.count(data.context.tool_name)
    return ALLOW


@tool_output_guardrail
def repetition_layer(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    ctx = data.context
    LAYERS.repetition(ctx.tool_name, json.loads(ctx.tool_arguments))
    return ALLOW


@tool_output_guardrail
def audit_layer(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    ctx = data.context
    LAYERS.record(ctx.tool_name, json.loads(ctx.tool_arguments), data.output)
    return ALLOW


@tool_input_guardrail
def deny_layer(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    LAYERS.deny(data.context.tool_name)
    return ALLOW


@tool_output_guardrail
def pass_layer(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    return ALLOW


async def build(n_layers: int) -> Config:
    if n_layers:
        echo_tool = function_tool(
            ECHO,
            tool_input_guardrails=[deny_layer],
            tool_output_guardrails=[count_layer, repetition_layer, audit_layer, pass_layer],
        )
    else:
        echo_tool = function_tool(ECHO)
    agent = Agent(name="bench", model=ScriptedModel(), tools=[echo_tool])

    async def run_turn() -> Any:
        return (await Runner.run(agent, "go", max_turns=ITERATIONS + 5)).final_output

    return Config(run_turn)


async def main() -> None:
    set_tracing_disabled(True)
    samples = await measure(build, LAYERS)
    emit(
        "openai-agents",
        f"openai-agents {version('openai-agents')}",
        samples,
        "Agent + Runner + fake Model; tool input/output guardrails as layers",
    )


if __name__ == "__main__":
    run_main(main)
