"""loopware driven by someone else's loop: a host's run as a turn, a host's call as a `ToolCall`.

`HostedRunner` holds the stack (the same ``middleware=[...]`` a `TurnRunner` takes); each host
run is a `HostedTurn` (`HostedRunner.begin`), whose `HostedTurn.call` runs the ``tool_call``
stage around the host's own handler, keyed by the host's call id, and stores one record per
call id; `HostedCall` says what the host does next. The adapters in ``middleware.adapters``
(pydantic-ai, LangChain) and the MCP gateway are built on it; docs/adapters/index.md maps each host.
"""

from ._call import HostedCall as HostedCall
from ._runner import HostedRunner as HostedRunner
from ._tools import HostArguments as HostArguments
from ._tools import HostCentre as HostCentre
from ._tools import HostTool as HostTool
from ._tools import host_tool as host_tool
from ._turn import HostedTurn as HostedTurn

__all__ = [
    "HostArguments",
    "HostCentre",
    "HostTool",
    "HostedCall",
    "HostedRunner",
    "HostedTurn",
    "host_tool",
]
