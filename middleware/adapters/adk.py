"""loopware's stack on Google ADK runners: `LoopwarePlugin` (extra ``adk``).

ADK is imported when the name is first used, not with this module; docs/adapters/adk.md maps an
invocation, its model steps and tool calls onto loopware's turn, iterations and `ToolCall`s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._host import lazy_host as _lazy_host

if TYPE_CHECKING:
    from ._adk import LoopwarePlugin as LoopwarePlugin

__all__ = ["LoopwarePlugin"]


__getattr__, __dir__ = _lazy_host(
    __name__, "middleware.adapters._adk", __all__, hosts=("google",), extra="adk"
)
