"""Tools from any MCP server under loopware's policies (extra ``mcp``).

`MCPToolset` connects to a server over stdio (a command line) or streamable HTTP (a URL) and
turns each of its tools into a loopware `Tool`. The ``mcp`` SDK is imported when a toolset
connects, never by ``import pipeline`` or by importing this package.
"""

from ._errors import MCPServerError as MCPServerError
from ._errors import MCPTimeoutError as MCPTimeoutError
from ._errors import MCPToolError as MCPToolError
from ._schema import MCPArguments as MCPArguments
from ._schema import schema_model as schema_model
from ._toolset import MCPToolset as MCPToolset

__all__ = [
    "MCPArguments",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPToolError",
    "MCPToolset",
    "schema_model",
]
