"""The sign-in tests' authorization server, completed by a person over plain HTTP.

The server itself (oidc-provider, ``tests/interop/oidc/as_server.mjs``) is
:func:`tests.interop.authorization_server.authorization_server`.
:func:`sign_in_over_http` completes its login and consent pages as a person would and returns
the address the browser would end on, without loading it (so a test can paste it, alter it,
or keep it from a loopback listener); :func:`grants` counts the tokens the server issued.
"""

from __future__ import annotations

from urllib.parse import urljoin

import httpx2

from tests.interop.authorization_server import AuthorizationServer, authorization_server

__all__ = ["PASSWORD", "USER", "AuthorizationServer", "authorization_server", "grants", "sign_in_over_http"]

#: The one person ``as_server.mjs`` knows (its defaults).
USER, PASSWORD = "ada", "lovelace-1815"


def grants(server: AuthorizationServer, grant_type: str) -> int:
    """How many tokens *server* issued with *grant_type* (``authorization_code``, ``refresh_token``)."""
    return server.log.read_text().count(f"grant {grant_type}")


def sign_in_over_http(authorization_url: str, redirect_prefix: str) -> str:
    """Log in and allow on the authorization server's pages; the address it redirects to.

    Follows the server's redirects (keeping its cookies) until one leaves for *redirect_prefix*
    (the client's redirect URI), which is returned unloaded.
    """
    with httpx2.Client(timeout=30) as client:
        url = authorization_url
        for _ in range(20):
            response = client.get(url)
            while response.is_redirect:
                url = urljoin(str(response.url), response.headers["location"])
                if url.startswith(redirect_prefix):
                    return url
                response = client.get(url)
            action = urljoin(str(response.url), _form_action(response.text))
            if 'id="login"' in response.text:
                response = client.post(action, data={"action": "login", "login": USER, "password": PASSWORD})
            else:
                response = client.post(action, data={"action": "consent"})
            if not response.is_redirect:
                raise AssertionError(
                    f"the authorization server answered {response.status_code}: {response.text}"
                )
            url = urljoin(str(response.url), response.headers["location"])
            if url.startswith(redirect_prefix):
                return url
        raise AssertionError("the authorization server never redirected to the client")


def _form_action(page: str) -> str:
    start = page.index('action="') + len('action="')
    return page[start : page.index('"', start)]
