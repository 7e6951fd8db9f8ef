"""The gateway over streamable HTTP: the SDK's app, its bearer auth, and who may bind where.

The app is the ``mcp`` SDK's own (``Server.streamable_http_app``) with the SDK's own
authentication: its ``AuthenticationMiddleware`` with a ``BearerAuthBackend`` over the
gateway's `TokenVerifier` (``loopware_cli/_gateway_auth.py``), and ``RequireAuthMiddleware``
answering 401 to a request without a valid token before the MCP session manager sees it.
`AccessAudit` only watches that answer go out and writes an ``access`` row to the audit
chain (method, path, peer and why: never the token). With no ``[auth]`` the gateway serves
loopback addresses only (`serve_check`): anyone who can reach a public port would be served.
"""

from __future__ import annotations

import ipaddress
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from middleware.audit import AuditEntry
from pipeline import canonical_json

from ._gateway_auth import build_verifier

if TYPE_CHECKING:
    from middleware.audit import AuditSink

    from ._gateway_config import GatewayConfig

__all__ = [
    "AUTH_POLICY",
    "EXIT_UNSAFE_BIND",
    "AccessAudit",
    "http_app",
    "is_loopback",
    "serve_check",
]

_log = logging.getLogger("loopware.gateway")

AUTH_POLICY: Final = "loopware.gateway.auth"
"""Who refused a request at the door, as audit rows name it."""
EXIT_UNSAFE_BIND: Final = 4
"""The exit status of ``loopware gateway --http`` on a non-loopback address without auth."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def serve_check(config: GatewayConfig, host: str) -> str | None:
    """Why the gateway must not serve HTTP on ``host`` with ``config``, or None when it may."""
    if config.auth is None and not is_loopback(host):
        return (
            f"refusing to serve {host} without authentication: add an [auth] table "
            "(tokens, jwt or introspection) or bind a loopback address such as 127.0.0.1"
        )
    return None


class AccessAudit:
    """ASGI middleware writing an ``access`` audit row for each request refused with 401/403.

    It changes nothing: the SDK's middleware decides and answers; this only watches the
    response start and records the refusal once it is sent.
    """

    __slots__ = ("_app", "_sink")

    def __init__(self, app: Any, sink: AuditSink | None) -> None:
        """Wrap ``app``; rows go to ``sink`` (None: only the log line)."""
        self._app = app
        self._sink = sink

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Pass the request on; record it when the answer is 401 or 403."""
        if scope.get("type") != "http":
            await self._app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Any) -> None:
            if message.get("type") == "http.response.start":
                status.append(int(message.get("status", 0)))
            await send(message)

        await self._app(scope, receive, watch)
        if status and status[0] in (401, 403):
            await self._refused(scope, status[0])

    async def _refused(self, scope: Any, status: int) -> None:
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        presented = headers.get("authorization", b"").lower().startswith(b"bearer ")
        if status == 403:
            reason = "the token lacks a required scope"
        elif presented:
            reason = "the bearer token was refused (unknown, expired or not for this gateway)"
        else:
            reason = "no bearer token"
        client = scope.get("client")
        peer = f"{client[0]}:{client[1]}" if client else "unknown"
        request = {"method": scope.get("method"), "path": scope.get("path"), "peer": peer}
        _log.info("refused %s %s from %s: %s", request["method"], request["path"], peer, reason)
        if self._sink is None:
            return
        entry = AuditEntry(
            kind="access",
            turn_id="",
            conversation_id=None,
            recorded_at=datetime.now(UTC),
            args=canonical_json(request),
            is_error=True,
            decision="denied",
            policy=AUTH_POLICY,
            reason=f"HTTP {status}: {reason}",
        )
        await self._sink.append([entry])


def _url_host(host: str) -> str:
    """``host`` as a URL spells it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def http_app(
    server: Any, config: GatewayConfig, sink: AuditSink | None, host: str, port: int
) -> Any:
    """The ASGI app serving ``server`` at ``/mcp``: the SDK's, with its bearer auth when set."""
    auth = config.auth
    if auth is None:
        return server.streamable_http_app(host=host)
    from mcp.server.auth.settings import AuthSettings

    issuer = (
        auth.jwt.issuer
        if auth.jwt is not None
        else auth.introspection.issuer
        if auth.introspection is not None and auth.introspection.issuer is not None
        else auth.resource_url or f"http://{_url_host(host)}:{port}"
    )
    settings = AuthSettings(
        issuer_url=issuer,  # pydantic parses the URL
        resource_server_url=auth.resource_url,  # pydantic parses it
        validate_token_resource=False if auth.resource_url is not None else None,
    )
    app = server.streamable_http_app(host=host, auth=settings, token_verifier=build_verifier(auth))
    return AccessAudit(app, sink)
