"""The scenario on Google ADK: ``LlmAgent`` + ``InMemoryRunner``, layers as plugins.

Run with the interpreter of ``bench/peers/.venvs/google_adk``. Prints one JSON line.

- Fake model: a ``BaseLlm`` subclass whose ``generate_content_async`` reads the id of the latest
  ``function_response`` part in the request to pick the next call.
- Layers: one ``BasePlugin`` subclass per layer, passed to ``InMemoryRunner(plugins=[...])``.
  The deny-list layer uses ``before_tool_callback``, the others ``after_tool_callback``.
- A turn is one ``runner.run_async`` on a fresh session (an ADK session carries the history, so
  reusing one would grow every later turn). Sessions are created untimed before each batch, as
  loopware's per-turn runners are.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
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
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

LAYERS = Layers()
USER = "bench"
# Real models report usage; without it ADK logs a warning on every model call, which would bill
# ADK for a stderr write per iteration.
USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=1, candidates_token_count=1, total_token_count=2
)


class ScriptedLlm(BaseLlm):
    """Proposes ``echo`` calls until ITERATIONS tool results exist, then answers FINAL_TEXT."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last_id = None
        if llm_request.contents:
            for part in llm_request.contents[-1].parts or ():
                if part.function_response is not None:
                    last_id = part.function_response.id
        k = iteration_after(last_id)
        if k < ITERATIONS:
            part = types.Part(
                function_call=types.FunctionCall(id=call_id(k), name="echo", args=dict(ARGS[k % 3]))
            )
        else:
            part = types.Part(text=FINAL_TEXT)
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=USAGE)


class CountLayer(BasePlugin):
    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        LAYERS.count(tool.name)
        return None


class RepetitionLayer(BasePlugin):
    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        LAYERS.repetition(tool.name, tool_args)
        return None


class AuditLayer(BasePlugin):
    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        LAYERS.record(tool.name, tool_args, result)
        return None


class DenyLayer(BasePlugin):
    async def before_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
    ) -> dict[str, Any] | None:
        LAYERS.deny(tool.name)
        return None


class PassLayer(BasePlugin):
    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        return None


MESSAGE = types.Content(role="user", parts=[types.Part(text="go")])


async def build(n_layers: int) -> Config:
    plugins: list[BasePlugin] = (
        [
            CountLayer("count"),
            RepetitionLayer("repetition"),
            AuditLayer("audit"),
            DenyLayer("deny"),
            PassLayer("pass"),
        ]
        if n_layers
        else []
    )
    agent = LlmAgent(name="bench", model=ScriptedLlm(model="scripted"), tools=[ECHO])
    runner = InMemoryRunner(agent=agent, app_name="bench", plugins=plugins)
    sessions: list[str] = []

    async def prepare(n: int) -> None:
        sessions.clear()
        for _ in range(n):
            session = await runner.session_service.create_session(app_name="bench", user_id=USER)
            sessions.append(session.id)

    async def run_turn() -> Any:
        text = None
        async for event in runner.run_async(
            user_id=USER, session_id=sessions.pop(), new_message=MESSAGE
        ):
            if event.content and event.content.parts and event.content.parts[0].text:
                text = event.content.parts[0].text
        return text

    return Config(run_turn, prepare)


async def main() -> None:
    samples = await measure(build, LAYERS)
    emit(
        "google-adk",
        f"google-adk {version('google-adk')}",
        samples,
        "LlmAgent + InMemoryRunner + fake BaseLlm; one BasePlugin per layer",
    )


if __name__ == "__main__":
    run_main(main)
