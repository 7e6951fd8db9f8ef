"""A plain pass-through MCP proxy on the ``mcp`` SDK alone: the floor the gateway is measured on.

Run: ``python -m bench.mcp_gateway_proxy [--prefix P] [--name N] [--http HOST:PORT] -- COMMAND
[ARG ...]``. It starts the upstream stdio server ``COMMAND`` with the SDK's own `Client` (its
``stdio_client`` transport), and serves the SDK's low-level `Server` on its own stdio with the
SDK's ``stdio_server`` (or, with ``--http``, the SDK's streamable HTTP app under uvicorn, as the
gateway serves it): ``tools/list`` answers with the upstream's tools (each name behind
``--prefix``), and ``tools/call`` forwards the call (the prefix taken off) and answers with the
upstream's result as the SDK's client returned it. No policy, no validation, no audit, nothing
of loopware: what any proxy built on the same SDK costs. ``bench/mcp_gateway.py`` times the
gateway against it, and ``tests/mcp/test_gateway_sdk.py`` compares the gateway's answers with
its answers (``--name`` gives it the gateway's server name, so the ``serverInfo`` stamps match).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

__all__ = ["proxy_command", "serve"]


def proxy_command(
    upstream: list[str], prefix: str = "", name: str = "mcp-proxy", http: str | None = None
) -> list[str]:
    """The arguments after ``python`` that run this proxy in front of ``upstream``."""
    where = ["--http", http] if http is not None else []
    command = ["-m", "bench.mcp_gateway_proxy", "--prefix", prefix, "--name", name, *where]
    return [*command, "--", *upstream]


async def serve(upstream: list[str], prefix: str, name: str, http: str | None = None) -> None:
    """Proxy ``upstream`` (a command line) on stdio (or HTTP at ``http``) until stopped."""
    import mcp_types as types
    from mcp import Client, StdioServerParameters, stdio_server
    from mcp.server.lowlevel import Server

    command, *args = upstream
    params = StdioServerParameters(command=command, args=args)
    async with Client(params, read_timeout_seconds=60) as client:
        listed = (await client.list_tools()).tools
        tools = [tool.model_copy(update={"name": prefix + tool.name}) for tool in listed]

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
            remote = params.name.removeprefix(prefix)
            return await client.call_tool(remote, params.arguments)

        server = Server(name, on_list_tools=list_tools, on_call_tool=call_tool)
        if http is not None:
            import uvicorn

            host, _, port = http.rpartition(":")
            app = server.streamable_http_app(host=host)
            config = uvicorn.Config(app, host=host, port=int(port), log_level="warning")
            await uvicorn.Server(config).serve()
            return
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def main() -> None:
    """Parse the command line and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", default="", help="put before every upstream tool name")
    parser.add_argument("--name", default="mcp-proxy", help="the server name clients are told")
    parser.add_argument("--http", default=None, help="serve streamable HTTP at HOST:PORT")
    parser.add_argument("upstream", nargs="+", help="the upstream stdio server's command line")
    options = parser.parse_args()
    asyncio.run(serve(options.upstream, options.prefix, options.name, options.http))


if __name__ == "__main__":
    main()
