"""Signing in through the CLI against a real authorization server (oidc-provider), in headless Chromium.

The authorization server (``oidc/as_server.mjs``: oidc-provider 9.13.3, on the Node 24 wheel)
issues JWT access tokens for the example analysis server, run with ``--auth-issuer``. The CLI
signs in as it does for a person: its ``BROWSER`` (``oidc/sign_in_browser.py``) completes the
authorization server's login and consent pages in Chromium. Each sign-in a person was asked
for is one line of the browser's log.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx2

from jupyter_fsbroker.protocol.auth import resource_of
from tests.interop.authorization_server import SigningInCli, require_chromium
from tests.support.servers import analysis_server_http


def test_sign_in_then_reuse_refresh_and_sign_out(issuer: tuple[str, Path], tmp_path: Path) -> None:
    require_chromium()
    issuer_url, as_log = issuer
    cli = SigningInCli(tmp_path)
    connect, asked, store = cli.connect, cli.asked, cli.store
    with analysis_server_http("--auth-issuer", issuer_url) as server:
        outputs = []
        first = connect(server.url)
        outputs.append(first.stdout + first.stderr)
        assert first.returncode == 0, first.stderr
        assert "profile_csv" in first.stdout and asked() == 1
        record = store.load(resource_of(server.url))
        assert record is not None and record.tokens is not None
        access = record.tokens["access_token"]
        refresh = record.tokens["refresh_token"]
        # Signed in: the next run reuses the token; no person is asked.
        second = connect(server.url)
        outputs.append(second.stdout + second.stderr)
        assert second.returncode == 0 and asked() == 1, second.stderr
        # Expired (as far as the client knows): refreshed at the authorization server, no browser.
        store.save(type(record)(**{**record.__dict__, "expires_at": time.time() - 1}))
        third = connect(server.url)
        outputs.append(third.stdout + third.stderr)
        assert third.returncode == 0 and asked() == 1, third.stderr
        renewed = store.load(resource_of(server.url))
        assert renewed is not None and renewed.tokens is not None
        assert renewed.tokens["access_token"] != access
        assert "grant refresh_token" in as_log.read_text()
        # Signed out: the next run asks again.
        out = cli.run("signout", server.url, timeout=60)
        assert out.returncode == 0 and store.load(resource_of(server.url)) is None
        # No notice: the revocation was taken.
        assert out.stderr == f"jupyter-fsbroker: signed out of {server.url}\n", out.stderr
        # Revoked at the authorization server (RFC 7009), not only forgotten here.
        assert renewed.client is not None and renewed.discovery is not None
        client = renewed.client
        answer = httpx2.post(
            renewed.discovery["as"]["token_endpoint"],
            data={"grant_type": "refresh_token", "refresh_token": renewed.tokens["refresh_token"]},
            auth=(client["client_id"], client["client_secret"]),
            timeout=30,
        )
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant", answer.status_code
        fourth = connect(server.url)
        outputs.append(fourth.stdout + fourth.stderr)
        assert fourth.returncode == 0 and asked() == 2, fourth.stderr
        server_log = server.log
    secrets = {access, refresh, renewed.tokens["access_token"], renewed.tokens["refresh_token"]}
    for text in [*outputs, server_log, as_log.read_text()]:
        assert not [secret for secret in secrets if secret in text]
