"""loopware's stack on OpenAI Agents SDK runs: `Loopware` (extra ``openai-agents``).

The SDK is imported when the name is first used, not with this module; docs/adapters.md maps a
run, its model steps and function-tool calls onto loopware's turn, iterations and `ToolCall`s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._openai_agents import Loopware as Loopware

__all__ = ["Loopware"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("middleware.adapters._openai_agents")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("agents"):
            raise
        raise ImportError(
            f"{name} needs the OpenAI Agents SDK: pip install 'loopware[openai-agents]'"
        ) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
