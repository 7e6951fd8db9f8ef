"""The gateway's token verifiers (``loopware_cli/_gateway_auth.py``) and the ``[auth]``,
``[caps]`` and ``[gateway]`` tables: a static token is accepted only by its exact hash; a JWT
only when signed by a key of the provider's JWKS, for the configured issuer and audience,
unexpired; an opaque token only when the introspection endpoint says it is active and ours;
the principal names its source so no provider can mint a static principal; bad tables name
the key."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("mcp")
pytest.importorskip("jwt")

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from loopware_cli._gateway_auth import (
    AnyVerifier,
    IntrospectionVerifier,
    JwtVerifier,
    StaticTokenVerifier,
    build_verifier,
)
from loopware_cli._gateway_config import GatewayConfigError, load_config
from loopware_cli._gateway_config_auth import IntrospectionConfig, JwtConfig, StaticToken
from middleware.audit import JsonlAuditSink

ISSUER = "https://idp.test/"
AUDIENCE = "loopware-gateway"


class _Provider(BaseHTTPRequestHandler):
    """A JWKS endpoint and an introspection endpoint, answering from class attributes."""

    jwks: ClassVar[dict[str, Any]] = {}
    active: ClassVar[dict[str, dict[str, Any]]] = {}
    fetches: ClassVar[int] = 0

    def do_GET(self) -> None:
        type(self).fetches += 1
        self._answer(self.jwks)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        token = dict(p.split("=", 1) for p in body.split("&"))["token"]
        assert self.headers["Authorization"].startswith("Basic ")
        self._answer(self.active.get(token, {"active": False}))

    def _answer(self, value: object) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    _Provider.jwks = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
    return private


def token(key: rsa.RSAPrivateKey, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, "iat": now}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    encoded: str = jwt.encode(body, key, algorithm="RS256", headers={"kid": "k1"})
    return encoded


async def test_a_static_token_is_accepted_only_by_its_exact_hash() -> None:
    verifier = StaticTokenVerifier(
        [
            StaticToken("alice", hashlib.sha256(b"secret-a").hexdigest()),
            StaticToken("bob", hashlib.sha256(b"secret-b").hexdigest()),
        ]
    )
    accepted = await verifier.verify_token("secret-b")
    assert accepted is not None
    assert accepted.client_id == "bob"
    for wrong in ("secret-", "secret-bb", "SECRET-B", "", "secret-a\n"):
        assert await verifier.verify_token(wrong) is None
    assert "secret" not in repr(verifier)
    assert "sha" not in repr(StaticToken("alice", "0" * 64))


async def test_a_jwt_is_accepted_only_signed_for_this_audience_issuer_and_time(
    provider: str, key: rsa.RSAPrivateKey
) -> None:
    verifier = JwtVerifier(
        JwtConfig(jwks_url=f"{provider}/jwks", issuer=ISSUER, audience=AUDIENCE, leeway=0)
    )
    good = await verifier.verify_token(token(key))
    assert good is not None
    assert good.client_id == "jwt:alice"
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = [
        token(key, exp=int(time.time()) - 10),  # expired
        token(key, aud="someone-else"),
        token(key, iss="https://evil.test/"),
        token(key, sub=None),  # no principal
        token(key, exp=None),  # no expiry at all
        token(other_key),  # signed by a key the provider does not publish
    ]
    for bad in refused:
        assert await verifier.verify_token(bad) is None
    fetches = _Provider.fetches
    assert await verifier.verify_token("not-a-jwt") is None
    assert _Provider.fetches == fetches  # an opaque token costs no key fetch


async def test_an_opaque_token_is_accepted_when_introspection_says_it_is_active_and_ours(
    provider: str,
) -> None:
    _Provider.active = {
        "good": {"active": True, "sub": "bob#x", "aud": [AUDIENCE], "exp": time.time() + 60},
        "theirs": {"active": True, "sub": "bob", "aud": "another-api"},
        "stale": {"active": True, "sub": "bob", "aud": AUDIENCE, "exp": time.time() - 5},
    }
    config = IntrospectionConfig(
        url=f"{provider}/introspect", client_id="gw", client_secret="s3", audience=AUDIENCE
    )
    verifier = IntrospectionVerifier(config)
    good = await verifier.verify_token("good")
    assert good is not None
    assert good.client_id == "introspection:bob%23x"  # no '#': the conversation separator
    for bad in ("theirs", "stale", "unknown"):
        assert await verifier.verify_token(bad) is None
    down = IntrospectionVerifier(
        IntrospectionConfig(url="http://127.0.0.1:9/x", client_id="gw", client_secret="s3")
    )
    assert await down.verify_token("good") is None
    assert "s3" not in repr(config)


async def test_any_verifier_takes_the_first_that_accepts() -> None:
    static = StaticTokenVerifier([StaticToken("ci", hashlib.sha256(b"t").hexdigest())])
    either = AnyVerifier([static, StaticTokenVerifier([])])
    found = await either.verify_token("t")
    assert found is not None
    assert found.client_id == "ci"
    assert await either.verify_token("u") is None


def write(folder: Path, text: str) -> Path:
    path = folder / "gateway.toml"
    path.write_text('[[upstream]]\ncommand = ["python", "-c", "pass"]\n' + text)
    return path


def test_tokens_come_by_hash_file_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "b.token").write_text("token-b\n")
    monkeypatch.setenv("GW_TOKEN_C", "token-c")
    digest = hashlib.sha256(b"token-a").hexdigest()
    config = load_config(
        write(
            tmp_path,
            f"""
[[auth.token]]
principal = "a"
sha256 = "{digest.upper()}"
[[auth.token]]
principal = "b"
file = "b.token"
[[auth.token]]
principal = "c"
env = "GW_TOKEN_C"
""",
        )
    )
    assert config.auth is not None
    expected = [hashlib.sha256(t.encode()).hexdigest() for t in ("token-a", "token-b", "token-c")]
    assert [t.sha256 for t in config.auth.tokens] == expected
    assert isinstance(build_verifier(config.auth), StaticTokenVerifier)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[auth]\n", "auth: give [[auth.token]], [auth.jwt] or [auth.introspection]"),
        (
            '[[auth.token]]\nprincipal = "a"\nenv = "X"\nfile = "y"\n',
            "auth.token[0]: give exactly one of sha256, file and env",
        ),
        ('[[auth.token]]\nprincipal = "a#b"\nsha256 = "' + "0" * 64 + '"\n', "principal"),
        ('[[auth.token]]\nprincipal = "a"\nenv = "GW_UNSET_VARIABLE"\n', "is not set"),
        ('[[auth.token]]\nprincipal = "a"\nsha256 = "abc"\n', "must be 64 hex digits"),
        (
            '[[auth.token]]\nprincipal = "a"\nsha256 = "'
            + "0" * 64
            + '"\n[[auth.token]]\nprincipal = "b"\nsha256 = "'
            + "0" * 64
            + '"\n',
            "the same token is given twice",
        ),
        (
            '[auth.jwt]\njwks_url = "https://i/j"\nissuer = "i"\naudience = "a"\n'
            'algorithms = ["HS256"]\n',
            "cannot be checked against a JWKS",
        ),
        ("[caps.principal]\nper_second = { total = 1 }\n", "caps.principal: unknown keys"),
        ('[caps.gateway]\nper_minute = { "fx_*" = 1 }\n', "must be a tool name"),
        ("[caps.gateway]\nper_minute = { total = 0 }\n", "caps.gateway.per_minute.total"),
        ("[caps.gateway]\nper_minute = {}\n", "give total = N"),
        ("[gateway]\nroll_over = 0\n", "gateway.roll_over"),
        ("[gateway]\nmax_concurrent = 0\n", "gateway.max_concurrent"),
        ("[gateway]\nrollover = 10\n", "gateway: unknown keys ['rollover']"),
    ],
    ids=[
        "empty-auth",
        "two-sources",
        "bad-principal",
        "unset-env",
        "bad-hash",
        "duplicate",
        "hmac-jwt",
        "bad-window",
        "glob-cap",
        "zero-cap",
        "empty-cap",
        "zero-roll-over",
        "zero-concurrency",
        "typo",
    ],
)
def test_a_bad_table_names_its_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(GatewayConfigError, match=None) as caught:
        load_config(write(tmp_path, text))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("gateway.example", False),  # a name may resolve anywhere
    ],
)
def test_only_loopback_addresses_are_served_without_auth(host: str, loopback: bool) -> None:
    from loopware_cli._gateway_config import GatewayConfig
    from loopware_cli._gateway_config_auth import AuthConfig
    from loopware_cli._gateway_http import serve_check

    assert (serve_check(GatewayConfig(upstreams=()), host) is None) is loopback
    authenticated = GatewayConfig(
        upstreams=(), auth=AuthConfig(tokens=(StaticToken("a", "0" * 64),))
    )
    assert serve_check(authenticated, host) is None


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ("8765", "127.0.0.1:8765"),
        (":8765", "127.0.0.1:8765"),
        ("0.0.0.0:8765", "0.0.0.0:8765"),
        ("[::1]:8765", "[::1]:8765"),
        ("nowhere", None),
        ("host:0", None),
        ("host:70000", None),
    ],
)
def test_http_binds_127_0_0_1_unless_a_host_is_given(given: str, address: str | None) -> None:
    from loopware_cli._gateway_server import http_address

    assert http_address(given) == address


async def test_over_http_a_jwt_names_its_principal_and_an_expired_one_is_a_401(
    tmp_path: Path, call_log: Path, provider: str, key: rsa.RSAPrivateKey
) -> None:
    import httpx2

    from tests.mcp.conftest import logged
    from tests.mcp.gateway_http import client, http_gateway, write_config

    extra = (
        f'[auth.jwt]\njwks_url = "{provider}/jwks"\nissuer = "{ISSUER}"\n'
        f'audience = "{AUDIENCE}"\nleeway = 0\n'
    )
    config = write_config(tmp_path, call_log, auth=False, extra=extra)
    with http_gateway(config, tmp_path / "stderr.txt") as url:
        async with client(url, token(key)) as mcp:
            answer = await mcp.call_tool("fx_echo", {"text": "signed"})
        expired = token(key, exp=int(time.time()) - 5)
        async with httpx2.AsyncClient() as http:
            refused = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {expired}",
                    "Accept": "application/json, text/event-stream",
                },
            )
    assert not answer.is_error
    assert refused.status_code == 401
    assert [c["args"]["text"] for c in logged(call_log)] == ["signed"]
    sink = JsonlAuditSink(tmp_path / "audit.jsonl")
    try:
        rows = [(r.entry.kind, r.entry.conversation_id) for r in sink.rows()]
    finally:
        sink.close()
    assert ("tool_call", "jwt:alice") in rows
    assert ("access", None) in rows
    assert expired not in (tmp_path / "stderr.txt").read_text()
