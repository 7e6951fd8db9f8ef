"""loopware's stack on OpenAI Agents SDK runs: `Loopware` (extra ``openai-agents``).

The SDK is imported when the name is first used, not with this module;
docs/adapters/openai-agents.md maps a run, its model steps and function-tool calls onto
loopware's turn, iterations and `ToolCall`s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._host import lazy_host as _lazy_host

if TYPE_CHECKING:
    from ._openai_agents import Loopware as Loopware

__all__ = ["Loopware"]


__getattr__, __dir__ = _lazy_host(
    __name__,
    "middleware.adapters._openai_agents",
    __all__,
    hosts=("agents",),
    extra="openai-agents",
)
