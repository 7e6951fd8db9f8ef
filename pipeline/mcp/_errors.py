"""Errors of the MCP integration (``pipeline.mcp``): a server that failed a call.

::

    ToolDownstreamError (E_TOOL_DOWNSTREAM_ERROR)
    ├── MCPServerError (E_MCP_SERVER)        the server could not be reached, died or broke protocol
    │   └── MCPTimeoutError (E_MCP_TIMEOUT)  the server did not answer in time
    └── MCPToolError (E_MCP_TOOL_ERROR)      the server answered the call with ``isError``

All of them are tool errors: a call that raises one becomes an error call the model reads, and
the turn goes on.
"""

from __future__ import annotations

from ..errors import ToolDownstreamError

__all__ = ["MCPServerError", "MCPTimeoutError", "MCPToolError"]


class MCPServerError(ToolDownstreamError):
    """The MCP server could not be reached, died during the call, or broke the protocol.

    Attributes:
        server: The server's label (its command line or URL).
    """

    code = "E_MCP_SERVER"
    status = 502
    default_message = "the MCP server failed"


class MCPTimeoutError(MCPServerError):
    """The MCP server did not answer within the call's timeout."""

    code = "E_MCP_TIMEOUT"
    status = 504
    default_message = "the MCP server did not answer in time"


class MCPToolError(ToolDownstreamError):
    """The MCP server answered the call with ``isError: true``; the message is its text."""

    code = "E_MCP_TOOL_ERROR"
    status = 502
    default_message = "the MCP tool reported an error"


for _cls in (MCPServerError, MCPTimeoutError, MCPToolError):
    _cls.__module__ = "pipeline.mcp"
