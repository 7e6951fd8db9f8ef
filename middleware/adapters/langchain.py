"""loopware's stack inside LangChain v1 agents: `LoopwareMiddleware` (extra ``langchain``).

LangChain and LangGraph are imported when a name is first used, not with this module;
docs/adapters.md maps an invocation, its model steps and tool calls onto loopware's turn,
iterations and `ToolCall`s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._langchain import LoopwareMiddleware as LoopwareMiddleware
    from ._langchain import LoopwareState as LoopwareState

__all__ = ["LoopwareMiddleware", "LoopwareState"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("middleware.adapters._langchain")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith(("langchain", "langgraph")):
            raise
        raise ImportError(
            f"{name} needs LangChain: pip install 'loopware[langchain]'"
        ) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
