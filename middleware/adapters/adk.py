"""loopware's stack on Google ADK runners: `LoopwarePlugin` (extra ``adk``).

ADK is imported when the name is first used, not with this module; docs/adapters.md maps an
invocation, its model steps and tool calls onto loopware's turn, iterations and `ToolCall`s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._adk import LoopwarePlugin as LoopwarePlugin

__all__ = ["LoopwarePlugin"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("middleware.adapters._adk")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("google"):
            raise
        raise ImportError(f"{name} needs Google ADK: pip install 'loopware[adk]'") from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
