"""`ShownTools`: an OpenAI Agents SDK model that is shown only the tools loopware did not hide.

The SDK builds one tool list per step for both the model and the run: a tool left out of it (a
disabled tool) is unknown to the run, and a call to it made anyway is answered by the SDK itself
(``tool_not_found_behavior``), never reaching loopware. So the adapter leaves every wrapped tool
enabled and filters what the model is shown instead: a call to a hidden tool still reaches its
wrapped ``on_invoke_tool``, and loopware refuses it with an audit row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from agents.models.interface import Model

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.models.interface import ModelTracing
    from agents.tool import Tool

__all__ = ["ShownTools"]


class ShownTools(Model):
    """Delegate to ``inner`` with the tools ``hidden()`` names left out of every request."""

    def __init__(self, inner: Model, hidden: Callable[[], frozenset[str]]) -> None:
        """Wrap ``inner``; ``hidden`` names the tools to leave out at each request."""
        self.inner = inner
        self.hidden = hidden

    def _shown(self, tools: list[Tool]) -> list[Tool]:
        hidden = self.hidden()
        if not hidden:
            return tools
        return [t for t in tools if getattr(t, "name", None) not in hidden]

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.inner.close()

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        """The wrapped model's response, shown only the tools loopware did not hide."""
        return await self.inner.get_response(
            system_instructions,
            input,
            model_settings,
            self._shown(tools),
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The wrapped model's stream, shown only the tools loopware did not hide."""
        return self.inner.stream_response(
            system_instructions,
            input,
            model_settings,
            self._shown(tools),
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
