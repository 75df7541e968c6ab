"""Telling the authorization server at sign-out: token revocation (RFC 7009), best effort.

:func:`revoke` posts the stored refresh token, then the access token, to the
``revocation_endpoint`` of the authorization server's metadata (kept with the tokens), with
the client's own authentication (:func:`client_authentication`: the same as at the token
endpoint). It never raises: sign-out forgets the tokens whatever the authorization server
says, and only a notice tells that it could not be reached or has no endpoint. The notice
names the authorization server, never a token.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx2

from .store import StoredSignIn

__all__ = ["REVOKE_TIMEOUT", "client_authentication", "revoke", "token_endpoint_auth_method"]

log = logging.getLogger(__name__)

#: Seconds sign-out may spend telling the authorization server, in all.
REVOKE_TIMEOUT = 5.0


def token_endpoint_auth_method(method: str | None, secret: str | None, supported: list[str] | None) -> str:
    """How a client authenticates: its registered *method*, else what the metadata allows.

    Without a method, a client with a secret uses ``client_secret_basic`` (RFC 8414's default)
    unless the server lists only ``client_secret_post``; without a secret, ``none``.
    """
    if method:
        return method
    if not secret:
        return "none"
    return "client_secret_post" if supported == ["client_secret_post"] else "client_secret_basic"


def client_authentication(
    client: Mapping[str, Any], supported: list[str] | None
) -> tuple[dict[str, str], dict[str, str]]:
    """The form fields and headers that authenticate *client* (RFC 6749 §2.3.1)."""
    client_id = str(client.get("client_id", ""))
    secret = client.get("client_secret")
    method = token_endpoint_auth_method(client.get("token_endpoint_auth_method"), secret, supported)
    if method == "client_secret_basic" and secret:
        credentials = f"{quote(client_id, safe='')}:{quote(str(secret), safe='')}"
        return {}, {"authorization": "Basic " + base64.b64encode(credentials.encode()).decode()}
    if method == "client_secret_post" and secret:
        return {"client_id": client_id, "client_secret": str(secret)}, {}
    return {"client_id": client_id}, {}


def revoke(record: StoredSignIn, timeout: float = REVOKE_TIMEOUT) -> str | None:
    """Revoke *record*'s tokens; ``None`` when the authorization server took them, else a notice."""
    tokens = record.tokens or {}
    pending = [(tokens.get(kind), kind) for kind in ("refresh_token", "access_token")]
    pending = [(token, kind) for token, kind in pending if token]
    if not pending:
        return None
    metadata = (record.discovery or {}).get("as") or {}
    issuer = metadata.get("issuer") or record.issuer
    server = f"the authorization server {issuer}" if issuer else "its authorization server"
    endpoint = metadata.get("revocation_endpoint")
    if not endpoint or not record.client:
        return f"{server} offers no token revocation; the tokens were only forgotten here"
    data, headers = client_authentication(
        record.client, metadata.get("revocation_endpoint_auth_methods_supported")
    )
    deadline = time.monotonic() + timeout
    refused: list[str] = []
    try:
        with httpx2.Client(follow_redirects=False) as client:
            for token, kind in pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise httpx2.TimeoutException("out of time")
                response = client.post(
                    endpoint,
                    data={**data, "token": str(token), "token_type_hint": kind},
                    headers=headers,
                    timeout=remaining,
                )
                if response.status_code != 200:
                    # RFC 7009 answers 200 for a token already invalid: anything else is a refusal.
                    log.debug("revoking the %s: HTTP %d", kind, response.status_code)
                    refused.append(kind.replace("_", " "))
    except httpx2.HTTPError as exc:
        return (
            f"{server} could not be reached to revoke the tokens ({type(exc).__name__}); "
            "they were only forgotten here"
        )
    if "refresh token" in refused:
        return f"{server} refused to revoke the refresh token; it was only forgotten here"
    return None
