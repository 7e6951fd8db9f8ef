"""loopware's stack inside LangChain v1 agents: `LoopwareMiddleware` (extra ``langchain``).

LangChain and LangGraph are imported when a name is first used, not with this module;
docs/adapters/langchain.md maps an invocation, its model steps and tool calls onto loopware's turn,
iterations and `ToolCall`s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._host import lazy_host as _lazy_host

if TYPE_CHECKING:
    from ._langchain import LoopwareMiddleware as LoopwareMiddleware
    from ._langchain import LoopwareState as LoopwareState

__all__ = ["LoopwareMiddleware", "LoopwareState"]


__getattr__, __dir__ = _lazy_host(
    __name__,
    "middleware.adapters._langchain",
    __all__,
    hosts=("langchain", "langgraph"),
    extra="langchain",
)
