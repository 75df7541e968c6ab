"""Signing in from a notebook in JupyterLab, in Chromium, against a real authorization server.

The example server runs behind oidc-provider (:mod:`tests.support.authserver`, access tokens
that live a few seconds). A data scientist connects: the cell shows "Sign in to hosted (…)", the
link opens the authorization server's login and consent pages in a new tab, its redirect comes
back to the kernel's loopback listener, and the cell goes on to profile the CSV. Past the token's
lifetime a call is refreshed with no second login and no card. After ``%fsbroker signout`` the
next connect shows the card again; there the address the sign-in ends on is pasted into the
card, first altered (``state``, then ``iss``: refused, nothing stored, still waiting), then as
it is.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from jupyter_fsbroker.protocol.auth import FileTokenStore, resource_of
from tests.support.authserver import (
    PASSWORD,
    USER,
    AuthorizationServer,
    authorization_server,
    grants,
    sign_in_over_http,
)
from tests.support.servers import AnalysisServer, analysis_server_http

from .lab import JupyterLab
from .notebook import CELL_TIMEOUT_MS, Notebook

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

#: Seconds an access token lives: short, so that the test sees one expire.
TOKEN_TTL = 6
SALES_CSV = "region,amount\nnorth,10\nsouth,20\neast,\nwest,40\n"
PROFILE = "hosted.call_tool('profile_csv', {'path': 'data/sales.csv'}).data['rows']"


@pytest.fixture
def protected(tmp_path: Path) -> Iterator[tuple[AuthorizationServer, AnalysisServer]]:
    with (
        authorization_server(tmp_path, "--token-ttl", str(TOKEN_TTL)) as auth,
        analysis_server_http("--auth-issuer", auth.issuer) as server,
    ):
        yield auth, server


def log_in(tab: Any) -> None:
    """The authorization server's pages, as a person completes them (signed in to it already: consent)."""
    first = tab.locator("#login, #allow").first
    first.wait_for()
    if first.get_attribute("id") == "login":
        tab.fill("#login", USER)
        tab.fill("#password", PASSWORD)
        tab.click("#submit")
    tab.click("#allow")


def test_sign_in_in_the_browser_refresh_sign_out_and_tampered_answers(
    jupyterlab: JupyterLab, page: Any, protected: tuple[AuthorizationServer, AnalysisServer]
) -> None:
    from playwright.sync_api import expect

    auth, server = protected
    (jupyterlab.root / "data").mkdir()
    (jupyterlab.root / "data" / "sales.csv").write_text(SALES_CSV, encoding="utf-8")
    connect = f"hosted = broker.connect('hosted', url={server.url!r})"
    cells = [
        "%load_ext jupyter_fsbroker\nimport jupyter_fsbroker as fsb\nbroker = fsb.get_broker()\n"
        'broker.add_root("data", name="data")\nbroker.allow("data/sales.csv")',
        connect,
        PROFILE,
        PROFILE,
        "%fsbroker signout hosted",
        connect,
        PROFILE,
    ]
    notebook = Notebook(page, jupyterlab, jupyterlab.create_notebook("sign-in.ipynb", cells))
    notebook.open()
    store = FileTokenStore(Path(jupyterlab.env["XDG_DATA_HOME"]) / "jupyter_fsbroker" / "oauth")
    resource = resource_of(server.url)
    notebook.run_and_wait(0)

    # 1. Connect: the card; its link opens the sign-in in a new tab; the cell goes on.
    notebook.run(1)
    card = notebook.output(1).locator(".fsbroker-signin")
    link = card.locator("a.fsbroker-signin-open")
    expect(link).to_have_text(f"Sign in to hosted ({auth.issuer})", timeout=CELL_TIMEOUT_MS)
    assert link.get_attribute("target") == "_blank" and link.get_attribute("rel") == "noopener"
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    log_in(tab)
    expect(tab.locator("body")).to_contain_text("Signed in")
    tab.close()
    notebook.wait_done(1)
    expect(card.locator(".fsbroker-signin-status")).to_have_text(f"Signed in to {auth.issuer}.")
    assert notebook.run_and_wait(2).strip().endswith("4")
    record = store.load(resource)
    assert record is not None and record.tokens is not None and record.expires_at is not None

    # 2. Past the token's lifetime: refreshed, no second login, no card.
    time.sleep(max(0.0, record.expires_at - time.time()) + 1)  # the clock is what is waited for
    assert notebook.run_and_wait(3).strip().endswith("4")
    assert notebook.output(3).locator(".fsbroker-signin").count() == 0
    assert grants(auth, "refresh_token") >= 1 and grants(auth, "authorization_code") == 1

    # 3. Signed out: the next connect asks again, and this time the address is pasted.
    assert "Signed out of hosted." in notebook.run_and_wait(4)
    assert store.load(resource) is None
    notebook.run(5)
    card = notebook.output(5).locator(".fsbroker-signin")
    link = card.locator("a.fsbroker-signin-open")
    expect(link).to_be_visible(timeout=CELL_TIMEOUT_MS)
    # The person signs in and copies the address the browser ended on; here the authorization
    # server's pages are completed over HTTP, which gets that address without loading it.
    href = link.get_attribute("href") or ""
    redirect_uri = parse_qs(urlsplit(href).query)["redirect_uri"][0]
    address = sign_in_over_http(href, redirect_uri)
    state = re.search(r"state=([^&]+)", address).group(1)  # type: ignore[union-attr]
    paste, submit = card.locator(".fsbroker-signin-paste input"), card.get_by_role("button", name="Submit")
    status = card.locator(".fsbroker-signin-status")
    for tampered, words in (
        (address.replace(f"state={state}", "state=tampered"), "state mismatch"),
        (re.sub(r"iss=[^&]+", "iss=http%3A%2F%2Fevil.example.com", address), "iss mismatch"),
    ):
        paste.fill(tampered)
        submit.click()
        expect(status).to_contain_text(words)
        expect(paste).to_have_value("")
        assert notebook.prompt(5) == "[*]:", "the sign-in must still wait"
        stored = store.load(resource)
        assert stored is None or not stored.signed_in
    paste.fill(address)
    submit.click()
    notebook.wait_done(5)
    assert notebook.run_and_wait(6).strip().endswith("4")
    assert grants(auth, "authorization_code") == 2
