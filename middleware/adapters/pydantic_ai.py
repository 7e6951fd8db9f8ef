"""loopware's stack inside pydantic-ai: `LoopwareCapability` (extra ``pydantic-ai``).

pydantic-ai is imported when the name is first used, not with this module; docs/adapters.md
maps pydantic-ai's run, steps and calls onto loopware's turn, iterations and `ToolCall`s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._pydantic_ai import LoopwareCapability as LoopwareCapability

__all__ = ["LoopwareCapability"]


def __getattr__(name: str) -> Any:
    if name != "LoopwareCapability":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("middleware.adapters._pydantic_ai")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("pydantic_ai"):
            raise
        raise ImportError(
            "LoopwareCapability needs pydantic-ai: pip install 'loopware[pydantic-ai]'"
        ) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
