"""The ``[auth]`` table of the gateway configuration: who may call the gateway over HTTP.

::

    [auth]
    resource_url = "https://tools.example/mcp"   # optional: this gateway's public URL

    [[auth.token]]               # a static bearer token, naming its principal
    principal = "ci-bot"
    sha256 = "9f86d081884c7d65..."   # the token's SHA-256 (hex); or one of:
    # file = "/run/secrets/ci-bot-token"   # the token itself, read from a file at start
    # env = "CI_BOT_TOKEN"                 # ... or from an environment variable

    [auth.jwt]                   # JWTs of an identity provider, checked against its JWKS
    jwks_url = "https://idp.example/.well-known/jwks.json"
    issuer = "https://idp.example/"
    audience = "loopware-gateway"
    principal_claim = "sub"      # the claim that names the principal (default sub)
    algorithms = ["RS256", "ES256"]

    [auth.introspection]         # or ask the provider (RFC 7662) about opaque tokens
    url = "https://idp.example/oauth2/introspect"
    client_id = "loopware-gateway"
    client_secret_env = "GATEWAY_INTROSPECTION_SECRET"   # or client_secret_file
    audience = "loopware-gateway"   # optional: the aud the answer must name

Plain tokens never sit in the file: a token is given by its hash, or read from a file or an
environment variable and hashed at start. A bad table raises `GatewayConfigError` naming the
key.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._gateway_config_errors import bad, strings, table

__all__ = ["AuthConfig", "IntrospectionConfig", "JwtConfig", "StaticToken", "parse_auth"]

_PRINCIPAL = re.compile(r"[A-Za-z0-9._@:+-]{1,128}")
"""What a static token's principal may be called (no ``#``: the gateway's separator)."""
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class StaticToken:
    """One static bearer token: its SHA-256 and the principal it names."""

    principal: str
    """Who presents it: the key of its limits, repetition history and approvals."""
    sha256: str
    """The token's SHA-256, as 64 lower-case hex digits (the token itself is never kept)."""

    def __repr__(self) -> str:
        """Name the principal only (the hash is a credential's fingerprint)."""
        return f"StaticToken(principal={self.principal!r})"


@dataclass(frozen=True, slots=True)
class JwtConfig:
    """JWTs signed by an identity provider's keys (its JWKS)."""

    jwks_url: str
    """Where the provider publishes its signing keys."""
    issuer: str
    """The ``iss`` every token must carry."""
    audience: str
    """The ``aud`` every token must name."""
    principal_claim: str = "sub"
    """The claim naming the principal."""
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    """The signature algorithms accepted (never ``none``, never HMAC with a public key)."""
    leeway: float = 30.0
    """Seconds of clock skew allowed on ``exp`` and ``nbf``."""


@dataclass(frozen=True, slots=True)
class IntrospectionConfig:
    """Opaque tokens checked by the provider's RFC 7662 introspection endpoint."""

    url: str
    """The introspection endpoint."""
    client_id: str
    """The gateway's client id at the provider (HTTP basic authentication)."""
    client_secret: str
    """The gateway's client secret (read from a file or the environment)."""
    principal_claim: str = "sub"
    """The answer's member naming the principal."""
    audience: str | None = None
    """The ``aud`` the answer must name, if any."""
    issuer: str | None = None
    """The ``iss`` the answer must carry, if any."""
    timeout: float = 10.0
    """Seconds the endpoint may take (past it the token is refused)."""

    def __repr__(self) -> str:
        """Everything but the secret."""
        return f"IntrospectionConfig(url={self.url!r}, client_id={self.client_id!r})"


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """How HTTP clients authenticate: static tokens, JWTs, introspection (any of them)."""

    tokens: tuple[StaticToken, ...] = ()
    """The static tokens."""
    jwt: JwtConfig | None = None
    """The JWT verifier's settings, if any."""
    introspection: IntrospectionConfig | None = None
    """The introspection verifier's settings, if any."""
    resource_url: str | None = None
    """The gateway's public URL (advertised as the protected resource), if set."""


def _secret(key: str, entry: dict[str, Any], base: Path, name: str) -> str | None:
    """The secret an entry gives by ``<name>_file`` / ``<name>_env`` (or ``file`` / ``env``)."""
    file_key, env_key = (f"{name}_file", f"{name}_env") if name else ("file", "env")
    if file_key in entry:
        path = entry[file_key]
        if not isinstance(path, str) or not path:
            raise bad(f"{key}.{file_key}", "must be a path")
        try:
            value = (base / path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise bad(f"{key}.{file_key}", f"cannot read it: {exc.strerror or exc}") from None
    elif env_key in entry:
        variable = entry[env_key]
        if not isinstance(variable, str) or not variable:
            raise bad(f"{key}.{env_key}", "must name an environment variable")
        value = os.environ.get(variable, "").strip()
        if not value:
            raise bad(f"{key}.{env_key}", f"the environment variable {variable} is not set")
    else:
        return None
    if not value:
        raise bad(f"{key}.{file_key}", "the secret is empty")
    return value


def _token(n: int, raw: object, base: Path) -> StaticToken:
    key = f"auth.token[{n}]"
    entry = table(key, raw)
    if unknown := sorted(set(entry) - {"principal", "sha256", "file", "env"}):
        raise bad(key, f"unknown keys {unknown}")
    if sum(k in entry for k in ("sha256", "file", "env")) != 1:
        raise bad(key, "give exactly one of sha256, file and env")
    principal = entry.get("principal")
    if not isinstance(principal, str) or _PRINCIPAL.fullmatch(principal) is None:
        raise bad(f"{key}.principal", "must be 1 to 128 of A-Z a-z 0-9 . _ @ : + -")
    digest = entry.get("sha256")
    if digest is not None:
        if not isinstance(digest, str) or _HEX.fullmatch(digest.lower()) is None:
            raise bad(f"{key}.sha256", "must be 64 hex digits (the token's SHA-256)")
        return StaticToken(principal=principal, sha256=digest.lower())
    secret = _secret(key, entry, base, "")
    assert secret is not None  # exactly one of the three keys is present
    return StaticToken(principal=principal, sha256=hashlib.sha256(secret.encode()).hexdigest())


def _url(key: str, value: object) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise bad(key, "must be an http:// or https:// URL")
    return value


def _text(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise bad(key, "must be a non-empty string")
    return value


def _jwt(raw: object) -> JwtConfig:
    entry = table("auth.jwt", raw)
    known = {"jwks_url", "issuer", "audience", "principal_claim", "algorithms", "leeway"}
    if unknown := sorted(set(entry) - known):
        raise bad("auth.jwt", f"unknown keys {unknown}")
    algorithms = strings("auth.jwt.algorithms", entry.get("algorithms", ["RS256", "ES256"]))
    if weak := [a for a in algorithms if a.lower() == "none" or a.upper().startswith("HS")]:
        raise bad("auth.jwt.algorithms", f"{weak} cannot be checked against a JWKS")
    leeway = entry.get("leeway", 30.0)
    if isinstance(leeway, bool) or not isinstance(leeway, int | float) or leeway < 0:
        raise bad("auth.jwt.leeway", "must be a number of seconds >= 0")
    return JwtConfig(
        jwks_url=_url("auth.jwt.jwks_url", entry.get("jwks_url")),
        issuer=_text("auth.jwt.issuer", entry.get("issuer")),
        audience=_text("auth.jwt.audience", entry.get("audience")),
        principal_claim=_text("auth.jwt.principal_claim", entry.get("principal_claim", "sub")),
        algorithms=algorithms,
        leeway=float(leeway),
    )


def _introspection(raw: object, base: Path) -> IntrospectionConfig:
    key = "auth.introspection"
    entry = table(key, raw)
    known = {
        "url",
        "client_id",
        "client_secret_file",
        "client_secret_env",
        "principal_claim",
        "audience",
        "issuer",
        "timeout",
    }
    if unknown := sorted(set(entry) - known):
        raise bad(key, f"unknown keys {unknown}")
    secret = _secret(key, entry, base, "client_secret")
    if secret is None:
        raise bad(key, "give client_secret_file or client_secret_env")
    timeout = entry.get("timeout", 10.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise bad(f"{key}.timeout", "must be a positive number of seconds")
    audience, issuer = entry.get("audience"), entry.get("issuer")
    return IntrospectionConfig(
        url=_url(f"{key}.url", entry.get("url")),
        client_id=_text(f"{key}.client_id", entry.get("client_id")),
        client_secret=secret,
        principal_claim=_text(f"{key}.principal_claim", entry.get("principal_claim", "sub")),
        audience=_text(f"{key}.audience", audience) if audience is not None else None,
        issuer=_text(f"{key}.issuer", issuer) if issuer is not None else None,
        timeout=float(timeout),
    )


def parse_auth(raw: object, base: Path) -> AuthConfig:
    """The ``[auth]`` table, checked (relative secret files are relative to ``base``).

    Raises:
        GatewayConfigError: a bad key, an unreadable secret, a principal named twice.
    """
    entry = table("auth", raw)
    if unknown := sorted(set(entry) - {"token", "jwt", "introspection", "resource_url"}):
        raise bad("auth", f"unknown keys {unknown}")
    raw_tokens = entry.get("token", [])
    if not isinstance(raw_tokens, list):
        raise bad("auth.token", "must be [[auth.token]] tables")
    tokens = tuple(_token(n, t, base) for n, t in enumerate(raw_tokens))
    if len({t.sha256 for t in tokens}) != len(tokens):
        raise bad("auth.token", "the same token is given twice")
    config = AuthConfig(
        tokens=tokens,
        jwt=_jwt(entry["jwt"]) if "jwt" in entry else None,
        introspection=(
            _introspection(entry["introspection"], base) if "introspection" in entry else None
        ),
        resource_url=(
            _url("auth.resource_url", entry["resource_url"]) if "resource_url" in entry else None
        ),
    )
    if not tokens and config.jwt is None and config.introspection is None:
        raise bad("auth", "give [[auth.token]], [auth.jwt] or [auth.introspection]")
    return config
