"""Signing in from a notebook, in a real kernel, against a real authorization server (oidc-provider).

The example server runs with ``--auth-issuer``; the connecting cell shows the sign-in card, the
test completes the authorization server's pages over HTTP as a person would and gets the address
the browser would end on (:mod:`tests.support.authserver`), then plays both ways back in: the
card's paste field and the panel's ``sign_in_response``. A tampered address must be refused with
nothing stored and the sign-in still waiting; the cell goes on with the right one. No token may
appear in the widgets' state, the panel's messages or the audit, while the store holds it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from jupyter_fsbroker.protocol.auth import FileTokenStore, resource_of
from tests.support.authserver import AuthorizationServer, authorization_server, grants, sign_in_over_http
from tests.support.panel_comm import Panel
from tests.support.servers import AnalysisServer, analysis_server_http
from tests.support.sign_in_card import card_parts, everything_sent, set_value, waiting

from .conftest import load
from .harness import Kernel

pytestmark = [pytest.mark.slow, pytest.mark.system]  # Node (the authorization server)


@pytest.fixture
def protected(tmp_path: Path) -> Iterator[tuple[AuthorizationServer, AnalysisServer]]:
    with authorization_server(tmp_path) as auth, analysis_server_http("--auth-issuer", auth.issuer) as server:
        yield auth, server


def with_panel(start_kernel: Callable[..., Kernel]) -> tuple[Kernel, Panel]:
    """A kernel with the extension loaded, data/sales.csv shared, and a panel on a subshell."""
    kernel = start_kernel()
    load(kernel)
    kernel.run('broker.allow("data/sales.csv")')
    return kernel, Panel(kernel, subshell_id=kernel.create_subshell())


def test_sign_in_from_the_card_refusing_tampered_addresses_then_sign_out(
    start_kernel: Callable[..., Kernel], protected: tuple[AuthorizationServer, AnalysisServer]
) -> None:
    auth, server = protected
    kernel, panel = with_panel(start_kernel)
    store = FileTokenStore(Path(kernel.env["XDG_DATA_HOME"]) / "jupyter_fsbroker" / "oauth")
    resource = resource_of(server.url)

    cell = kernel.submit(f"hosted = broker.connect('hosted', url={server.url!r})")
    card = kernel.wait_widget("fsbroker-signin")
    url, paste, submit, status = card_parts(kernel, card)
    assert f"Sign in to hosted ({auth.issuer}" in kernel.text_of(card)
    entry = waiting(panel.state(waiting))
    assert entry is not None and entry["state"] == "connecting" and entry["id"].startswith("signing-in:")
    sign_in = entry["auth"]["signIn"]
    assert sign_in["url"] == url and sign_in["receiver"] == "loopback"
    query = parse_qs(urlsplit(url).query)
    redirect_uri, state = query["redirect_uri"][0], query["state"][0]
    assert redirect_uri.startswith("http://127.0.0.1:")

    address = sign_in_over_http(url, redirect_uri)
    assert f"state={state}" in address and "iss=" in address
    # Tampered: another sign-in's state, another authorization server's iss. Refused, nothing stored.
    for tampered, words in (
        (address.replace(f"state={state}", "state=tampered"), "state mismatch"),
        (re.sub(r"iss=[^&]+", "iss=http%3A%2F%2Fevil.example.com", address), "iss mismatch"),
    ):
        result = panel.act("sign_in_response", signIn=sign_in["id"], address=tampered)
        assert not result["ok"] and words in result["message"], result
        assert "tampered" not in result["message"] and state not in result["message"]

    def no_tokens() -> bool:
        record = store.load(resource)  # the client's registration is kept: no token is
        return record is None or not record.signed_in

    assert no_tokens()
    assert waiting(panel.state()) is not None  # the snapshot after the last answer
    assert not cell.done
    # The card refuses the same and keeps waiting; its field is cleared as soon as read.
    # JupyterLab sends widget messages on a subshell: the main shell is blocked in the cell.
    set_value(kernel, paste, address.replace(f"state={state}", "state=tampered"), panel.subshell_id)
    kernel.click(submit, subshell_id=panel.subshell_id)
    kernel.wait_for(lambda: "state mismatch" in str(status.state.get("value")), 30, "the card to refuse")
    assert paste.state.get("value") == "" and no_tokens()
    # The right address, pasted into the card: the cell goes on.
    set_value(kernel, paste, address, panel.subshell_id)
    kernel.click(submit, subshell_id=panel.subshell_id)
    kernel.wait(cell, 120).check()
    kernel.wait_for(lambda: f"Signed in to {auth.issuer}" in str(status.state.get("value")), 30, "signed in")
    profile = kernel.value("hosted.call_tool('profile_csv', {'path': 'data/sales.csv'}).data['rows']")
    assert profile == 4
    signed_in = panel.state(
        lambda s: [c for c in s["connections"] if (c["auth"] or {}).get("status") == "signed_in"]
    )
    (conn,) = [c for c in signed_in["connections"] if c["name"] == "hosted"]
    assert (
        conn["auth"]["issuer"] == auth.issuer and conn["auth"]["expiresAt"] and conn["auth"]["signIn"] is None
    )

    record = store.load(resource)
    assert record is not None and record.tokens is not None  # the positive control
    secrets = {record.tokens["access_token"], record.tokens["refresh_token"]}
    assert all(len(s) > 20 for s in secrets)
    sent = everything_sent(kernel)
    assert [s for s in secrets if s in sent] == []
    code = parse_qs(urlsplit(address).query)["code"][0]
    assert code not in sent  # the pasted field's value is not echoed, and cleared at once

    # Signing out forgets the tokens and closes the connection; the next connect asks again.
    out = kernel.run("%fsbroker signout hosted").check()
    assert out.stdout.strip() == "Signed out of hosted." and store.load(resource) is None
    assert kernel.value("hosted.closed") is True
    records = kernel.value(
        "[r.to_json() for r in broker.core.audit.records() if r.method.startswith('auth/')]"
    )
    assert [(r["method"], r["issuer"], r["resource"]) for r in records] == [
        ("auth/signed_in", auth.issuer, resource),
        ("auth/signed_out", auth.issuer, resource),
    ]
    assert [s for s in secrets if s in json.dumps(records)] == []
    again = kernel.submit(f"broker.connect('hosted', url={server.url!r})")
    second = kernel.wait_widget("fsbroker-signin", exclude={card.comm_id})
    entry = waiting(panel.state(waiting))
    assert entry is not None
    assert panel.act("sign_out", connection=entry["id"])["ok"]  # ends the waiting sign-in
    failure = kernel.wait(again, 60).failure
    assert failure is not None and "cancelled" in failure["evalue"], failure
    assert second.comm_id != card.comm_id and grants(auth, "authorization_code") == 1


def test_the_panels_answer_says_signed_in_only_once_the_tokens_arrived(
    start_kernel: Callable[..., Kernel], protected: tuple[AuthorizationServer, AnalysisServer]
) -> None:
    auth, server = protected
    kernel, panel = with_panel(start_kernel)
    cell = kernel.submit(f"hosted = broker.connect('hosted', url={server.url!r})")
    card = kernel.wait_widget("fsbroker-signin")
    url = card_parts(kernel, card)[0]
    entry = waiting(panel.state(waiting))
    assert entry is not None
    address = sign_in_over_http(url, parse_qs(urlsplit(url).query)["redirect_uri"][0])
    # The answer the callback page shows as its acknowledgement: the flow's verdict.
    result = panel.act("sign_in_response", signIn=entry["auth"]["signIn"]["id"], address=address)
    assert result["ok"] and result["message"] == "Signed in to hosted.", result
    kernel.wait(cell, 120).check()
    assert grants(auth, "authorization_code") == 1
