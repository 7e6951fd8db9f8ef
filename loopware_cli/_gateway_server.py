"""The gateway as an MCP server: ``tools/list`` and ``tools/call`` over stdio or HTTP.

The server is the ``mcp`` SDK's own low-level `Server`, served by the SDK's ``stdio_server``
or its streamable HTTP app: the SDK parses, checks and answers every request, and the gateway
only supplies the two handlers. ``tools/list`` shows the upstream tools the policy permits,
with the schemas loopware validates against; ``tools/call`` runs the call through the client's
session (``loopware_cli/_gateway.py``) and answers with the upstream's own result when the call
was forwarded, or with an ``isError`` result carrying loopware's message when it was denied,
limited, rejected, invalid or failed upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from pipeline.errors import MissingExtraError

from ._gateway import Gateway, answer_call
from ._gateway_config import GatewayConfigError, load_config

__all__ = ["GATEWAY_DESCRIPTION", "add_gateway_arguments", "build_server", "client_key"]

_log = logging.getLogger("loopware.gateway")


def client_key(ctx: Any, transport: str) -> str:
    """Which conversation a request belongs to (see ``loopware_cli/_gateway.py``)."""
    if transport == "stdio":
        return "stdio"
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None:
        named = headers.get("x-loopware-conversation") or headers.get("mcp-session-id")
        if named:
            return str(named)[:200]
    meta = getattr(ctx, "meta", None) or {}
    info = meta.get("io.modelcontextprotocol/clientInfo") if isinstance(meta, dict) else None
    name = info.get("name", "client") if isinstance(info, dict) else "client"
    peer = getattr(request, "client", None)
    where = f"{peer.host}:{peer.port}" if peer is not None else "unknown"
    return f"{name}@{where}"


def build_server(gateway: Gateway, transport: str) -> Any:
    """A low-level MCP `Server` answering with ``gateway``'s tools."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.describe()["input_schema"],
                )
                for t in gateway.offered()
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        args = dict(params.arguments or {})
        return await answer_call(gateway, client_key(ctx, transport), params.name, args)

    return Server("loopware-gateway", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(config_path: str, http: str | None) -> int:
    """Start the gateway and serve until the client leaves (stdio) or the process is stopped."""
    try:
        config = load_config(config_path)
    except GatewayConfigError as exc:
        print(f"loopware gateway: error: {exc}", file=sys.stderr)
        return 3
    gateway = Gateway(config)
    try:
        await gateway.start()
    except Exception as exc:
        print(f"loopware gateway: error: {exc}", file=sys.stderr)
        await gateway.aclose()
        return 1
    try:
        if http is None:
            from mcp import stdio_server

            server = build_server(gateway, "stdio")
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            import uvicorn

            host, _, port = http.rpartition(":")
            server = build_server(gateway, "http")
            app = server.streamable_http_app(host=host)
            config_ = uvicorn.Config(app, host=host, port=int(port), log_level="warning")
            await uvicorn.Server(config_).serve()
    finally:
        await gateway.aclose()
    return 0


def _run(args: argparse.Namespace) -> int:
    http: str | None = args.http
    if http is not None:
        host, sep, port = http.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            print("loopware gateway: error: --http takes HOST:PORT", file=sys.stderr)
            return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        import mcp  # noqa: F401  (only to report a missing extra clearly)
    except ImportError as exc:  # told by main() as one line, exit 7
        raise MissingExtraError(extra="mcp", package="mcp", needed_by="loopware gateway") from exc
    try:
        return asyncio.run(serve(args.config, http))
    except KeyboardInterrupt:
        return 0


GATEWAY_DESCRIPTION = (
    "An MCP server that fronts the upstream MCP servers of --config (a TOML file:\n"
    "upstreams, policy, limits, repetition, approval, audit) and applies ToolPolicy,\n"
    "ToolCallLimit, RepetitionDetector, ApprovalGate and AuditLog to every call.\n"
    "Serves stdio (for clients that launch it) or, with --http HOST:PORT, streamable\n"
    "HTTP at http://HOST:PORT/mcp."
)


def add_gateway_arguments(parser: argparse.ArgumentParser) -> None:
    """The description, options and handler of ``loopware gateway``."""
    parser.description = GATEWAY_DESCRIPTION
    parser.add_argument("--config", required=True, help="the gateway's TOML configuration")
    parser.add_argument(
        "--http", default=None, metavar="HOST:PORT", help="serve streamable HTTP instead of stdio"
    )
    parser.set_defaults(handler=_run)
