"""loopware's stack inside pydantic-ai: `LoopwareCapability` (extra ``pydantic-ai``).

pydantic-ai is imported when the name is first used, not with this module;
docs/adapters/pydantic-ai.md maps pydantic-ai's run, steps and calls onto loopware's turn,
iterations and `ToolCall`s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._host import lazy_host as _lazy_host

if TYPE_CHECKING:
    from ._pydantic_ai import LoopwareCapability as LoopwareCapability

__all__ = ["LoopwareCapability"]


__getattr__, __dir__ = _lazy_host(
    __name__,
    "middleware.adapters._pydantic_ai",
    __all__,
    hosts=("pydantic_ai",),
    extra="pydantic-ai",
)
