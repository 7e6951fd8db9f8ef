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
from ._gateway_http import EXIT_UNSAFE_BIND, http_app, serve_check
from ._gateway_session import conversation_name

__all__ = [
    "DEFAULT_HOST",
    "GATEWAY_DESCRIPTION",
    "LOCAL",
    "STDIO",
    "add_gateway_arguments",
    "build_server",
    "caller",
    "http_address",
]

_log = logging.getLogger("loopware.gateway")

STDIO = "stdio"
"""The principal on stdio: the process that started the gateway."""
DEFAULT_HOST = "127.0.0.1"
"""Where ``--http PORT`` binds."""
LOCAL = "local"
"""The one principal of every HTTP client when no authentication is configured (loopback)."""


def caller(ctx: Any, transport: str) -> tuple[str, str | None]:
    """Who makes a request (the principal) and the conversation it names within itself.

    The principal is never what the client says: the process on stdio; over HTTP the
    principal of the token the SDK's bearer auth accepted (``request.user``), or `LOCAL`
    when the gateway runs without authentication. The ``X-Loopware-Conversation`` header only
    names a conversation *within* that principal (``[A-Za-z0-9._-]{1,64}``, else ignored).

    Raises:
        PermissionError: authentication is on and the request carries no accepted token
            (the SDK's middleware refuses such requests first; this is the second lock).
    """
    if transport == "stdio":
        return STDIO, None
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    named = conversation_name(headers.get("x-loopware-conversation")) if headers else None
    if transport == "http":
        return LOCAL, named
    scope = getattr(request, "scope", None) or {}
    user = scope.get("user")
    token = getattr(user, "access_token", None)
    principal = getattr(token, "client_id", None)
    if not isinstance(principal, str) or not principal:
        raise PermissionError("no authenticated principal")
    return principal, named


def build_server(gateway: Gateway, transport: str) -> Any:
    """A low-level MCP `Server` answering with ``gateway``'s tools.

    ``transport`` is ``"stdio"``, ``"http"`` (no authentication) or ``"http+auth"``.
    """
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
        principal, conversation = caller(ctx, transport)
        return await answer_call(gateway, principal, params.name, args, conversation)

    return Server("loopware-gateway", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(config_path: str, http: str | None) -> int:
    """Start the gateway and serve until the client leaves (stdio) or the process is stopped."""
    try:
        config = load_config(config_path)
    except GatewayConfigError as exc:
        print(f"loopware gateway: error: {exc}", file=sys.stderr)
        return 3
    if http is not None:
        refusal = serve_check(config, http.rpartition(":")[0])
        if refusal is not None:
            print(f"loopware gateway: error: {refusal}", file=sys.stderr)
            return EXIT_UNSAFE_BIND
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
            server = build_server(gateway, "http" if config.auth is None else "http+auth")
            app = http_app(server, config, gateway.sink, host, int(port))
            config_ = uvicorn.Config(
                app, host=host.strip("[]"), port=int(port), log_level="warning", access_log=False
            )
            await uvicorn.Server(config_).serve()
    finally:
        await gateway.aclose()
    return 0


def http_address(text: str) -> str | None:
    """``HOST:PORT`` from ``--http`` (``PORT`` or ``:PORT`` binds 127.0.0.1), or None if bad."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    if not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return f"{host or DEFAULT_HOST}:{int(port)}"


def _run(args: argparse.Namespace) -> int:
    http: str | None = args.http
    if http is not None:
        http = http_address(http)
        if http is None:
            print("loopware gateway: error: --http takes [HOST:]PORT", file=sys.stderr)
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
    "Serves stdio (for clients that launch it) or, with --http [HOST:]PORT, streamable\n"
    "HTTP at http://HOST:PORT/mcp (HOST 127.0.0.1 unless given; elsewhere needs [auth])."
)


def add_gateway_arguments(parser: argparse.ArgumentParser) -> None:
    """The description, options and handler of ``loopware gateway``."""
    parser.description = GATEWAY_DESCRIPTION
    parser.add_argument("--config", required=True, help="the gateway's TOML configuration")
    parser.add_argument(
        "--http",
        default=None,
        metavar="[HOST:]PORT",
        help=(
            "serve streamable HTTP instead of stdio, on 127.0.0.1 unless HOST is given "
            "(a non-loopback HOST needs [auth])"
        ),
    )
    parser.set_defaults(handler=_run)
