"""``serverkit.bearer``: the JWT access tokens a protected server accepts; what a client without one is told.

The issuer here publishes its metadata and signing keys over real HTTP (a thread of this
process) and signs tokens with a real RSA key; PyJWT checks them as in production. The
whole sign-in against a real authorization server is the end-to-end test's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp.server.mcpserver import MCPServer

from jupyter_fsbroker.serverkit.bearer import JwtVerifier, protect
from tests.support.cli import run_cli
from tests.support.servers import analysis_server_http

RESOURCE = "http://127.0.0.1:9/mcp"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer:
    """Metadata and JWKS at http://127.0.0.1:PORT, and tokens signed with its key."""

    def __init__(self) -> None:
        jwk = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
        jwk.update(kid="k1", use="sig", alg="RS256")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                documents = {
                    "/.well-known/oauth-authorization-server": issuer.metadata,
                    "/jwks": {"keys": [jwk]},
                }
                body = json.dumps(documents.get(self.path, {})).encode()
                self.send_response(200 if self.path in documents else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.metadata: dict[str, Any] = {"issuer": self.url, "jwks_uri": f"{self.url}/jwks"}
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": self.url,
            "aud": RESOURCE,
            "sub": "ada",
            "exp": now + 300,
            "iat": now,
            "scope": "mcp:tools",
        }
        body.update(claims)
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None}, KEY, "RS256", headers={"kid": "k1"}
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    server = Issuer()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.anyio
async def test_a_token_of_the_issuer_for_this_server_is_accepted(issuer: Issuer) -> None:
    granted = await JwtVerifier(issuer.url, RESOURCE).verify_token(issuer.token())
    assert granted is not None
    assert (granted.subject, granted.scopes, granted.resource) == ("ada", ["mcp:tools"], RESOURCE)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "http://127.0.0.1:9/other-server"},  # issued for another resource
        {"iss": "http://127.0.0.1:1/evil"},
        {"exp": int(time.time()) - 60},
        {"exp": None},
    ],
)
async def test_other_tokens_are_refused(issuer: Issuer, claims: dict[str, Any]) -> None:
    assert await JwtVerifier(issuer.url, RESOURCE).verify_token(issuer.token(**claims)) is None


@pytest.mark.anyio
async def test_a_token_signed_with_another_key_or_a_shared_secret_is_refused(issuer: Issuer) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(
        {"iss": issuer.url, "aud": RESOURCE, "exp": int(time.time()) + 60}, other, "RS256", {"kid": "k1"}
    )
    hmac = jwt.encode({"iss": issuer.url, "aud": RESOURCE, "exp": int(time.time()) + 60}, "k" * 32, "HS256")
    verifier = JwtVerifier(issuer.url, RESOURCE)
    assert await verifier.verify_token(forged) is None
    assert await verifier.verify_token(hmac) is None


@pytest.mark.anyio
async def test_an_issuer_whose_metadata_names_another_issuer_is_not_trusted(issuer: Issuer) -> None:
    issuer.metadata["issuer"] = "http://127.0.0.1:1/evil"
    assert await JwtVerifier(issuer.url, RESOURCE).verify_token(issuer.token()) is None


@pytest.mark.anyio
async def test_a_protected_server_answers_401_naming_its_metadata_which_names_the_issuer(
    issuer: Issuer,
) -> None:
    server: MCPServer[Any] = MCPServer("protected", **protect(issuer=issuer.url, resource_url=RESOURCE))
    app = server.streamable_http_app(host="127.0.0.1")
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as client:
        refused = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert 'resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"' in challenge
        metadata = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata["resource"] == RESOURCE
    assert [server.rstrip("/") for server in metadata["authorization_servers"]] == [issuer.url]


def test_the_analysis_server_behind_auth_issuer_takes_only_its_own_tokens(
    issuer: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with analysis_server_http("--auth-issuer", issuer.url) as server:
        own = issuer.token(aud=server.url)
        other = issuer.token(aud=server.url.replace("/mcp", "/other"))

        def list_tools(*header: str) -> int:
            return run_cli("connect", "--url", server.url, *header, "--list-tools").returncode

        assert list_tools("--header", f"Authorization: Bearer {own}") == 0
        assert list_tools("--header", f"Authorization: Bearer {other}") == 2
        assert list_tools() == 2
        log = server.log
    assert own not in log and other not in log
