"""A real authorization server for the sign-in tests: oidc-provider 9.13.3 on the Node 24 wheel.

:func:`authorization_server` runs ``tests/interop/oidc/as_server.mjs`` (configured, not written:
dynamic registration, PKCE, refresh tokens, RFC 8707 resources with JWT access tokens, RFC 9207
``iss``) for a ``with`` block; its log has one ``grant <type>`` line per token it issued.
:func:`sign_in_over_http` completes its login and consent pages as a person would, over plain
HTTP, and returns the address the browser would end on, without loading it (so a test can paste
it, alter it, or let a loopback listener have it).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import httpx2

from tests.support.node import install_or_skip
from tests.support.processes import stop_process

OIDC = Path(__file__).resolve().parents[1] / "interop" / "oidc"
USER, PASSWORD = "ada", "lovelace-1815"


@dataclass(frozen=True)
class AuthorizationServer:
    """A running authorization server: its issuer URL and its log file."""

    issuer: str
    log: Path

    def grants(self, grant_type: str) -> int:
        """How many tokens it issued with *grant_type* (``authorization_code``, ``refresh_token``)."""
        return self.log.read_text().count(f"grant {grant_type}")


@contextlib.contextmanager
def authorization_server(folder: Path, *, token_ttl: int = 3600) -> Iterator[AuthorizationServer]:
    """The authorization server for the ``with`` block (access tokens live *token_ttl* seconds)."""
    node, installed = install_or_skip(OIDC, "oidc-provider-9.13.3", "the sign-in tests")
    script = installed / "as_server.mjs"
    shutil.copyfile(OIDC / "as_server.mjs", script)  # beside its node_modules, for the import
    log = folder / "as.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [node.node, str(script), "--token-ttl", str(token_ttl)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, log.read_text()
        yield AuthorizationServer(json.loads(line)["issuer"], log)
    finally:
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()


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
