"""Sign-out tells the authorization server when it can, and forgets the tokens even when it cannot.

The revocation itself, taken by a real authorization server, is in
tests/interop/test_sign_in_oidc.py; these are the cases where it cannot be done.
"""

from __future__ import annotations

import base64
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.protocol.auth import FileTokenStore, OAuth, StoredSignIn, resource_of, sign_out
from jupyter_fsbroker.protocol.auth.revocation import client_authentication

URL = "http://127.0.0.1:9/mcp"
ISSUER = "http://127.0.0.1:9"
TOKENS = {"access_token": "at-secret-1", "refresh_token": "rt-secret-1", "token_type": "Bearer"}
CLIENT = {"client_id": "c1", "client_secret": "s3cret", "token_endpoint_auth_method": "client_secret_basic"}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens there now: connecting is refused


def signed_in(tmp_path: Path, metadata: dict[str, Any]) -> OAuth:
    settings = OAuth(store=tmp_path / "oauth")
    FileTokenStore(tmp_path / "oauth").save(
        StoredSignIn(
            resource_of(URL),
            issuer=ISSUER,
            client=CLIENT,
            tokens=TOKENS,
            expires_at=time.time() + 3600,
            discovery={"issuer": ISSUER, "as": {"issuer": ISSUER, **metadata}, "prm": None},
        )
    )
    return settings


@pytest.mark.parametrize(
    ("metadata", "notice"),
    [
        ({"revocation_endpoint": f"http://127.0.0.1:{closed_port()}/revoke"}, "could not be reached"),
        ({}, "offers no token revocation"),
    ],
    ids=["unreachable", "no-endpoint"],
)
def test_sign_out_forgets_whatever_the_authorization_server_says_and_tells_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, metadata: dict[str, Any], notice: str
) -> None:
    settings = signed_in(tmp_path, metadata)
    with caplog.at_level(logging.WARNING, logger="jupyter_fsbroker.protocol.auth"):
        assert sign_out(URL, settings) is True
    assert FileTokenStore(tmp_path / "oauth").load(resource_of(URL)) is None
    assert [record.levelno for record in caplog.records] == [logging.WARNING]
    assert notice in caplog.text and ISSUER in caplog.text
    assert "secret" not in caplog.text
    # Nothing stored any more: a second sign-out says so and asks nothing of anyone.
    assert sign_out(URL, settings) is False


def test_the_client_authenticates_at_revocation_as_at_the_token_endpoint() -> None:
    client = {"client_id": "id:1", "client_secret": "s/é"}
    data, headers = client_authentication(client, None)
    # RFC 6749 §2.3.1: form-encoded before Basic (a ':' in the id would split it otherwise).
    assert data == {} and base64.b64decode(headers["authorization"][6:]) == b"id%3A1:s%2F%C3%A9"
    data, headers = client_authentication(client, ["client_secret_post"])
    assert data == {"client_id": "id:1", "client_secret": "s/é"} and headers == {}
    data, headers = client_authentication({"client_id": "public", "token_endpoint_auth_method": "none"}, None)
    assert data == {"client_id": "public"} and headers == {}
