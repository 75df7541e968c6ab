"""A server behind MCP authorization: bearer tokens checked, protected-resource metadata served.

mcp 2.3 does the HTTP side when an ``MCPServer`` is built with ``auth=AuthSettings(...)`` and a
``token_verifier``: it serves the protected-resource metadata (RFC 9728) naming the
authorization server, answers a request without a valid token ``401`` with
``WWW-Authenticate: Bearer ... resource_metadata="..."`` (which is what starts a client's
sign-in) and one without the required scope ``403 insufficient_scope``. It ships no verifier;
:class:`JwtVerifier` is one for JWT access tokens (RFC 9068), the format most authorization
servers issue for a named resource (RFC 8707)::

    server = MCPServer("analysis", **protect(issuer="https://login.example.com",
                                             resource_url="https://analysis.example.com/mcp"))

A token is accepted only if it is signed by a key of the issuer's JWKS (found through the
issuer's metadata, whose ``issuer`` must be the one configured), names that issuer (``iss``),
is meant for this server (``aud`` holds *resource_url*: a token the same authorization server
issued for another server is refused) and has not expired. Why a token was refused is
logged; the token never is.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

if TYPE_CHECKING:
    import jwt

__all__ = ["JwtVerifier", "protect"]

log = logging.getLogger(__name__)

#: Asymmetric algorithms only: a shared-secret algorithm would let the JWKS's public key sign.
ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
_METADATA_PATHS = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")


class JwtVerifier:
    """mcp's ``TokenVerifier`` for the JWT access tokens of one issuer, for one resource.

    Parameters
    ----------
    issuer
        The authorization server's issuer identifier (its metadata is read from it once).
    resource
        This server's URL, the audience a token must name.
    leeway
        Seconds of clock difference allowed on ``exp``.
    """

    def __init__(self, issuer: str, resource: str, *, leeway: float = 0.0) -> None:
        self.issuer = issuer
        self.resource = resource
        self.leeway = leeway
        self._keys: jwt.PyJWKClient | None = None

    def __repr__(self) -> str:
        return f"JwtVerifier(issuer={self.issuer!r}, resource={self.resource!r})"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's grant if it is valid here, else ``None`` (mcp then answers 401)."""
        return await anyio.to_thread.run_sync(self._verify, token)

    def _verify(self, token: str) -> AccessToken | None:
        import jwt

        try:
            key = self._key_set().get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(ALGORITHMS),
                audience=self.resource,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, OSError, ValueError, KeyError) as exc:
            log.info("refused a bearer token: %s", type(exc).__name__)
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", claims.get("azp", ""))),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=self.resource,  # the audience was checked to hold it
            subject=claims.get("sub"),
        )

    def _key_set(self) -> jwt.PyJWKClient:
        import jwt

        if self._keys is None:
            metadata = _issuer_metadata(self.issuer)
            if metadata.get("issuer") != self.issuer:
                raise ValueError("the issuer's metadata names another issuer")
            self._keys = jwt.PyJWKClient(str(metadata["jwks_uri"]), cache_keys=True)
        return self._keys


def _issuer_metadata(issuer: str) -> dict[str, Any]:
    for path in _METADATA_PATHS:
        try:
            with urllib.request.urlopen(issuer.rstrip("/") + path, timeout=10) as response:  # noqa: S310
                metadata = json.load(response)
        except (OSError, ValueError):
            continue
        if isinstance(metadata, dict):
            return metadata
    raise ValueError("no authorization server metadata at the issuer")


def protect(*, issuer: str, resource_url: str, scopes: list[str] | None = None) -> dict[str, Any]:
    """The ``MCPServer`` keyword arguments that put it behind *issuer* as the resource *resource_url*.

    Parameters
    ----------
    issuer
        The authorization server's issuer identifier (https, or http on loopback).
    resource_url
        This server's endpoint as clients reach it (``https://host/mcp``).
    scopes
        The scopes every request needs (``403 insufficient_scope`` otherwise).
    """
    settings = AuthSettings(
        issuer_url=issuer,  # type: ignore[arg-type]
        resource_server_url=resource_url,  # type: ignore[arg-type]
        required_scopes=scopes,
        validate_token_resource=True,
    )
    return {"auth": settings, "token_verifier": JwtVerifier(issuer, resource_url)}
