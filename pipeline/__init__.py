"""loopware's core: tools, registries, the stash, contexts, the turn runner and gates.

The top level holds the core. Each wing is a public sub-package, and each of its names is
imported from there only: `pipeline.errors` (the `LoopError` tree), `pipeline.events` (what
listeners receive), `pipeline.stages` (the middleware contract), `pipeline.calls` (a tool
call's run, record and decisions), `pipeline.artifacts` (artifacts, media, trust envelopes),
`pipeline.stores` (persistence), `pipeline.models` (the model seam and the provider models),
`pipeline.durable` (durable turns), `pipeline.mcp` (MCP servers' tools) and `pipeline.testing`
(test doubles). docs/architecture.md, "Where each concept lives", maps each name to its module.
"""

from . import artifacts as artifacts
from . import calls as calls
from . import errors as errors
from . import events as events
from . import models as models
from . import stages as stages
from . import stores as stores
from ._context import ContextLog as ContextLog
from ._context import TurnContext as TurnContext
from ._dispatch import DispatchContext as DispatchContext
from ._executor import ToolLoopExecutor as ToolLoopExecutor
from ._gate import Gate as Gate
from ._gate import GateResult as GateResult
from ._json import canonical_json as canonical_json
from ._json import tool_call_checksum as tool_call_checksum
from ._registry import ToolRegistry as ToolRegistry
from ._result import TurnResult as TurnResult
from ._runner import TurnHandle as TurnHandle
from ._runner import TurnRunner as TurnRunner
from ._stash import Stash as Stash
from ._stash import StashKey as StashKey
from ._stash_snapshot import StashSnapshot as StashSnapshot
from ._tool import Tool as Tool
from ._tool import ToolContext as ToolContext
from ._tool import ToolOutput as ToolOutput
from ._tool_checks import is_tool_name as is_tool_name
from ._tool_decorator import tool as tool
from ._tool_threads import ToolThreads as ToolThreads

__all__ = [
    "ContextLog",
    "DispatchContext",
    "Gate",
    "GateResult",
    "Stash",
    "StashKey",
    "StashSnapshot",
    "Tool",
    "ToolContext",
    "ToolLoopExecutor",
    "ToolOutput",
    "ToolRegistry",
    "ToolThreads",
    "TurnContext",
    "TurnHandle",
    "TurnResult",
    "TurnRunner",
    "canonical_json",
    "is_tool_name",
    "tool",
    "tool_call_checksum",
]
