"""Sign-in answers that must be refused, against a real authorization server (oidc-provider) in Chromium.

The CLI signs in through its loopback receiver; the ``BROWSER`` (``oidc/replay_browser.py``)
completes the authorization server's pages, stops at the redirect back to the CLI and opens
an altered address instead: a tampered ``state`` (the receiver refuses it, the sign-in goes
on waiting, and the genuine address then completes it), or a wrong ``iss`` (the flow refuses
it: ``issuer_mismatch``, nothing stored, and the browser's page says so). A token issued for
another resource, put in a server's record, is refused by that server with ``401``, and the
client asks for a sign-in rather than going on with it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2

from jupyter_fsbroker.protocol.auth import resource_of
from tests.interop.authorization_server import REPLAY_BROWSER, SigningInCli, require_chromium
from tests.support.servers import analysis_server_http

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def replaying(tmp_path: Path, mode: str) -> tuple[SigningInCli, Path]:
    replays = tmp_path / "replays.jsonl"
    cli = SigningInCli(tmp_path, REPLAY_BROWSER, FSBROKER_REPLAY=mode, FSBROKER_REPLAY_LOG=str(replays))
    return cli, replays


def opened(replays: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in replays.read_text().splitlines()]


def claims(jwt: str) -> dict[str, Any]:
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_a_tampered_state_is_refused_and_the_sign_in_waits_for_its_own(
    issuer: tuple[str, Path], tmp_path: Path
) -> None:
    require_chromium()
    issuer_url, as_log = issuer
    cli, replays = replaying(tmp_path, "state")
    with analysis_server_http("--auth-issuer", issuer_url) as server:
        out = cli.connect(server.url)
    assert [entry["address"] for entry in opened(replays)] == ["tampered", "genuine"]
    tampered, genuine = opened(replays)
    assert tampered["status"] == 404 and "no sign-in is waiting" in tampered["text"], tampered
    # Had the tampered answer been taken, the flow would have failed and nothing would answer now.
    assert genuine["status"] == 200 and "Signed in" in genuine["text"], genuine
    assert out.returncode == 0 and "profile_csv" in out.stdout, out.stderr
    # One code, exchanged once: for the genuine answer.
    assert as_log.read_text().count("grant authorization_code") == 1


def test_a_wrong_issuer_is_refused_and_nothing_is_stored(issuer: tuple[str, Path], tmp_path: Path) -> None:
    require_chromium()
    issuer_url, as_log = issuer
    cli, replays = replaying(tmp_path, "iss")
    with analysis_server_http("--auth-issuer", issuer_url) as server:
        out = cli.connect(server.url)
        record = cli.store.load(resource_of(server.url))
    assert [entry["address"] for entry in opened(replays)] == ["tampered"]
    (tampered,) = opened(replays)
    # The browser is told what the CLI says, not "Signed in", and no secret of the answer.
    assert "Signed in" not in tampered["text"], tampered
    assert "Sign-in failed: " in tampered["text"] and "(iss mismatch); refused" in tampered["text"], tampered
    assert out.returncode != 0
    assert "(iss mismatch); refused" in out.stderr, out.stderr
    assert record is None or not record.tokens
    assert "grant authorization_code" not in as_log.read_text()  # the code was never exchanged


def test_a_token_for_another_resource_is_refused_and_a_sign_in_is_asked(
    issuer: tuple[str, Path], tmp_path: Path
) -> None:
    require_chromium()
    issuer_url, _ = issuer
    cli = SigningInCli(tmp_path)
    with (
        analysis_server_http("--auth-issuer", issuer_url) as a,
        analysis_server_http("--auth-issuer", issuer_url) as b,
    ):
        signed_in_b = cli.connect(b.url)
        assert signed_in_b.returncode == 0 and cli.asked() == 1, signed_in_b.stderr
        of_b = cli.store.load(resource_of(b.url))
        assert of_b is not None and of_b.tokens is not None
        b_token = of_b.tokens["access_token"]
        assert claims(b_token)["aud"] == resource_of(b.url)
        # A's record holds B's sign-in, tokens and all.
        cli.store.save(replace(of_b, resource=resource_of(a.url)))
        refused = httpx2.post(
            a.url,
            json=INITIALIZE,
            headers={"authorization": f"Bearer {b_token}", "accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert refused.status_code == 401
        out = cli.connect(a.url)
        assert out.returncode == 0 and "profile_csv" in out.stdout, out.stderr
        assert cli.asked() == 2  # a person was asked to sign in to A
        of_a = cli.store.load(resource_of(a.url))
    assert of_a is not None and of_a.tokens is not None
    assert claims(of_a.tokens["access_token"])["aud"] == resource_of(a.url)
