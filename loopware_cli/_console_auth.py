"""Who may use the console: the start-up token, its session cookie, CSRF values, safe headers.

The token printed at start (``http://127.0.0.1:PORT/?token=...``) is exchanged once for a
session: the console answers with a redirect to the same page without the token and sets an
``HttpOnly``, ``SameSite=Strict`` cookie holding a fresh random session id (the token never
stays in the address bar or the history). Every other request needs that cookie; without it
the console answers 401 and changes nothing. Each answer form carries the session's CSRF value,
an HMAC of the session id under a key of this process, compared in constant time
(`hmac.compare_digest`). Every response carries a Content-Security-Policy that allows no inline
script or style, no framing and no form target but the console itself.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import Final
from urllib.parse import urlencode

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp

__all__ = ["COOKIE", "SECURITY_HEADERS", "ConsoleAuth", "TokenGate"]

COOKIE: Final = "loopware_console"
"""The session cookie's name, followed by ``_<port>``: cookies do not tell ports apart, and two
consoles on one host must not overwrite each other's session."""

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Sent with every response."""

_REFUSED: Final = (
    "loopware console: open the URL with ?token=... that `loopware console` printed at start\n"
)


class ConsoleAuth:
    """The console's token, its sessions, and the CSRF value of each session.

    Args:
        port: The port served (names the cookie).
        token: The access token (a fresh random one when None).
    """

    __slots__ = ("_cookie", "_key", "_sessions", "_token")

    def __init__(self, port: int, token: str | None = None) -> None:
        """Make the token and the CSRF key (see the class docstring)."""
        self._cookie = f"{COOKIE}_{port}"
        self._token = token if token is not None else secrets.token_urlsafe(32)
        self._key = secrets.token_bytes(32)
        self._sessions: set[str] = set()

    def __repr__(self) -> str:
        """Never show the token."""
        return f"ConsoleAuth(sessions={len(self._sessions)})"

    @property
    def cookie(self) -> str:
        """The session cookie's name."""
        return self._cookie

    @property
    def token(self) -> str:
        """The access token printed at start."""
        return self._token

    def token_matches(self, presented: str) -> bool:
        """Whether ``presented`` is the access token (constant time)."""
        return hmac.compare_digest(presented.encode(), self._token.encode())

    def open_session(self) -> str:
        """A new session id (the cookie's value)."""
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def session_of(self, request: Request) -> str | None:
        """The request's session id, when its cookie holds one this console opened."""
        session = request.cookies.get(self._cookie, "")
        return session if session in self._sessions else None

    def csrf_for(self, session: str) -> str:
        """The CSRF value of ``session`` (what its forms carry)."""
        return hmac.new(self._key, session.encode(), hashlib.sha256).hexdigest()

    def csrf_matches(self, session: str, presented: str) -> bool:
        """Whether ``presented`` is ``session``'s CSRF value (constant time)."""
        return hmac.compare_digest(self.csrf_for(session).encode(), presented.encode())


class TokenGate(BaseHTTPMiddleware):
    """Exchanges the token for a session cookie; refuses requests without a session."""

    def __init__(self, app: ASGIApp, auth: ConsoleAuth) -> None:
        """Guard ``app`` with ``auth``."""
        super().__init__(app)
        self.auth = auth

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Let a session through; trade a good token for one; refuse the rest (401/403)."""
        response: Response
        presented = request.query_params.get("token")
        if presented is not None:
            if not self.auth.token_matches(presented):
                response = PlainTextResponse("loopware console: wrong token\n", status_code=403)
            else:
                kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + (f"?{urlencode(kept)}" if kept else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(
                    self.auth.cookie,
                    self.auth.open_session(),
                    httponly=True,
                    samesite="strict",
                    secure=request.url.scheme == "https",
                    path="/",
                )
        elif self.auth.session_of(request) is None:
            response = PlainTextResponse(_REFUSED, status_code=401)
        else:
            response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response
