"""Who is calling the gateway over HTTP: token verifiers for the ``mcp`` SDK's bearer auth.

The SDK's streamable HTTP app does the HTTP side (``Authorization: Bearer`` parsing, 401 with
``WWW-Authenticate``, the ``exp`` check, the scopes, binding a session to the credential that
opened it); the gateway only supplies a `TokenVerifier` that turns a token into an
``AccessToken`` whose ``client_id`` is the **principal**: the name the gateway keys a caller's
limits, repetition history and approvals by.

* `StaticTokenVerifier`: the configured SHA-256 of each token; a presented token is hashed and
  compared with every configured hash in constant time (`hmac.compare_digest`, no early exit).
* `JwtVerifier`: a JWT signed by one of the keys the provider publishes (its JWKS), with the
  configured issuer and audience and an unexpired ``exp``; the principal is a claim (``sub``).
  PyJWT is imported when the first token is checked (the ``mcp`` extra installs it).
* `IntrospectionVerifier`: RFC 7662; the provider says whether an opaque token is active.
* `AnyVerifier`: the first of several verifiers that accepts a token.

No verifier logs a token or a hash of one. `principal_of` names a JWT or introspection
principal ``<claim value>`` prefixed by ``jwt:`` / ``introspection:`` so that no identity
provider can mint a static token's principal.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._gateway_config_auth import AuthConfig, IntrospectionConfig, JwtConfig, StaticToken

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken, TokenVerifier

__all__ = [
    "AnyVerifier",
    "IntrospectionVerifier",
    "JwtVerifier",
    "StaticTokenVerifier",
    "build_verifier",
    "principal_of",
]

_log = logging.getLogger("loopware.gateway")
_SEPARATOR = "#"
"""What a principal may not contain: the gateway names conversations ``<principal>#<name>``."""


def principal_of(token: AccessToken) -> str:
    """The principal an accepted token names (its ``client_id``, as the verifiers set it)."""
    return token.client_id


def _clean(kind: str, value: object) -> str | None:
    """``kind:value`` for a claim value usable as a principal (a non-empty string), else None."""
    if not isinstance(value, str) or not value or len(value) > 256:
        return None
    return f"{kind}:{value.replace(_SEPARATOR, '%23')}"


def _access(principal: str, token: str, claims: Mapping[str, Any] | None = None) -> AccessToken:
    from mcp.server.auth.provider import AccessToken

    scope = (claims or {}).get("scope")
    expires = (claims or {}).get("exp")
    return AccessToken(
        token=token,
        client_id=principal,
        scopes=scope.split() if isinstance(scope, str) else [],
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        subject=principal,
    )


class StaticTokenVerifier:
    """Accept the configured static tokens, each naming its principal."""

    __slots__ = ("_tokens",)

    def __init__(self, tokens: Sequence[StaticToken]) -> None:
        """Keep each token's hash (as bytes) and its principal."""
        self._tokens = tuple((bytes.fromhex(t.sha256), t.principal) for t in tokens)

    def __repr__(self) -> str:
        """How many tokens, never which."""
        return f"StaticTokenVerifier(tokens={len(self._tokens)})"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal when its hash is configured; every hash is compared."""
        presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for digest, principal in self._tokens:
            if hmac.compare_digest(presented, digest) and found is None:
                found = principal
        return None if found is None else _access(found, token)


def _unverified_header(token: str) -> dict[str, Any] | None:
    """The JOSE header of a compact JWT, or None when the token is not one."""
    head = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    return header if isinstance(header, dict) else None


class JwtVerifier:
    """Accept JWTs signed by the provider's published keys, for this audience and issuer."""

    __slots__ = ("_client", "_config")

    def __init__(self, config: JwtConfig) -> None:
        """Remember the settings; the key set is fetched when a token first needs it."""
        self._config = config
        self._client: Any = None

    def __repr__(self) -> str:
        """The issuer and audience."""
        return f"JwtVerifier(issuer={self._config.issuer!r}, audience={self._config.audience!r})"

    def _decode(self, token: str) -> dict[str, Any] | None:
        import jwt

        config = self._config
        if self._client is None:
            self._client = jwt.PyJWKClient(config.jwks_url, cache_keys=True, lifespan=300)
        try:
            key = self._client.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(config.algorithms),
                audience=config.audience,
                issuer=config.issuer,
                leeway=config.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            _log.info("JWT refused: %s", type(exc).__name__)
            return None
        return claims

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal (its ``principal_claim``) when it verifies; else None."""
        if _unverified_header(token) is None:
            return None  # not a JWT: let another verifier try it, without a key fetch
        claims = await asyncio.to_thread(self._decode, token)
        if claims is None:
            return None
        principal = _clean("jwt", claims.get(self._config.principal_claim))
        return None if principal is None else _access(principal, token, claims)


class IntrospectionVerifier:
    """Ask the provider's RFC 7662 endpoint whether a token is active, and whose it is."""

    __slots__ = ("_config",)

    def __init__(self, config: IntrospectionConfig) -> None:
        """Remember the endpoint and the gateway's credentials there."""
        self._config = config

    def __repr__(self) -> str:
        """The endpoint."""
        return f"IntrospectionVerifier(url={self._config.url!r})"

    def _ask(self, token: str) -> dict[str, Any] | None:
        config = self._config
        basic = base64.b64encode(f"{config.client_id}:{config.client_secret}".encode()).decode()
        request = urllib.request.Request(
            config.url,
            data=urllib.parse.urlencode({"token": token}).encode(),
            method="POST",
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=config.timeout) as response:
                answer = json.loads(response.read(1 << 20))
        except (OSError, ValueError) as exc:
            _log.warning("token introspection failed: %s", type(exc).__name__)
            return None
        return answer if isinstance(answer, dict) else None

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal when the provider says it is active (and for us)."""
        answer = await asyncio.to_thread(self._ask, token)
        config = self._config
        if answer is None or answer.get("active") is not True:
            return None
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires < time.time():
            return None
        if config.issuer is not None and answer.get("iss") != config.issuer:
            return None
        if config.audience is not None:
            audience = answer.get("aud")
            named = audience if isinstance(audience, list) else [audience]
            if config.audience not in named:
                return None
        principal = _clean("introspection", answer.get(config.principal_claim))
        return None if principal is None else _access(principal, token, answer)


class AnyVerifier:
    """The first of several verifiers that accepts a token (static tokens are tried first)."""

    __slots__ = ("_verifiers",)

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        """Try ``verifiers`` in order."""
        self._verifiers = tuple(verifiers)

    def __repr__(self) -> str:
        """The verifiers."""
        return f"AnyVerifier({list(self._verifiers)!r})"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The first verifier's answer that is not None."""
        for verifier in self._verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def build_verifier(config: AuthConfig) -> TokenVerifier:
    """The verifier ``config`` describes (static tokens, then JWT, then introspection)."""
    verifiers: list[TokenVerifier] = []
    if config.tokens:
        verifiers.append(StaticTokenVerifier(config.tokens))
    if config.jwt is not None:
        verifiers.append(JwtVerifier(config.jwt))
    if config.introspection is not None:
        verifiers.append(IntrospectionVerifier(config.introspection))
    return verifiers[0] if len(verifiers) == 1 else AnyVerifier(verifiers)
