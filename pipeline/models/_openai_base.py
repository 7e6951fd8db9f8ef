"""What `OpenAIChatModel` and `OpenAIResponsesModel` share.

The client, the settings, the per-turn conversion cache, tool definitions rendered once per tool
list, and closing the client.

Each subclass names its API's reserved parameters (``RESERVED``), converts one conversation
step (``_convert``) and renders tool definitions (``_render_tools``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ._openai_shared import check_settings, make_client, provider_name
from ._prefix import PrefixCache

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from ..artifacts._envelope import ToolLookup
    from ._prefix import ConversationStep
    from ._tool_defs import ToolDescription

__all__ = ["OpenAIBase"]

Json = dict[str, Any]


class OpenAIBase:
    """The shared half of the two OpenAI models (see the module docstring)."""

    __slots__ = ("_client", "_prefix", "_settings", "_tools", "_tools_view", "model", "provider")

    RESERVED: ClassVar[frozenset[str]] = frozenset()
    """Parameters the model sets itself (refused as settings)."""
    DEFAULTS: ClassVar[Mapping[str, Any]] = {}
    """Settings sent unless overridden."""

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        **settings: Any,
    ) -> None:
        """Build the model (and the client, unless one is given)."""
        check_settings(model, settings, self.RESERVED)
        max_retries = settings.pop("max_retries", None)
        self._client = make_client(
            client, base_url=base_url, api_key=api_key, max_retries=max_retries, model=model
        )
        self.model = model
        """The model name sent with every request."""
        self.provider = provider_name(self._client)
        """``"openai"``, or ``"openai-compatible"`` for another server."""
        self._settings: Json = {**self.DEFAULTS, **settings}
        self._prefix: PrefixCache[Json] = PrefixCache(self._convert)
        self._tools_view: ToolLookup | None = None
        self._tools: tuple[tuple[ToolDescription, ...], list[Json]] = ((), [])

    def __repr__(self) -> str:
        """Show the model, the provider and the server."""
        return (
            f"{type(self).__name__}({self.model!r}, provider={self.provider!r}, "
            f"base_url={str(self._client.base_url)!r})"
        )

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client the model calls."""
        return self._client

    async def aclose(self) -> None:
        """Close the SDK client's connections (a client you passed in too); await it when done."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        """``async with model:`` closes the client at the end."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the client."""
        await self.aclose()

    def _tool_defs(self, tools: tuple[ToolDescription, ...]) -> list[Json]:
        """The rendered tool definitions, rendered again only when the tools change."""
        seen, rendered = self._tools
        if len(seen) != len(tools) or any(a is not b for a, b in zip(seen, tools, strict=True)):
            rendered = self._render_tools(tools)
            self._tools = (tools, rendered)
        return rendered

    def _render_tools(self, tools: tuple[ToolDescription, ...]) -> list[Json]:
        raise NotImplementedError

    def _convert(self, step: ConversationStep) -> list[Json]:
        raise NotImplementedError
