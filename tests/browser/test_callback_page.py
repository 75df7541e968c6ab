"""The OAuth callback page of the JupyterLab extension (``static/oauth-callback.html``).

The authorization server sends the browser back to
``<baseUrl>lab/extensions/jupyter_fsbroker/static/oauth-callback.html?code=…&state=…``: JupyterLab
serves it without login (the redirect carries no Jupyter token), at the root and under a
JupyterHub-like ``base_url``. The page hands the query to the JupyterLab tabs of its origin on
``BroadcastChannel("jupyter_fsbroker.oauth")`` and says "Signed in" once one of them
acknowledges; with nobody to take it, it shows the address to paste into the sign-in card. The
code leaves the address bar and the history at once.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pytest

from .lab import JupyterLab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("labextension")]

PAGE = "lab/extensions/jupyter_fsbroker/static/oauth-callback.html"
QUERY = "?code=c0de-Secret&state=st4te&iss=http%3A%2F%2F127.0.0.1%3A1"

#: A tab of the same origin that takes every redirect and acknowledges it (stands for JupyterLab's).
_LISTENER = """(ack) => new Promise(resolve => {
  const channel = new BroadcastChannel('jupyter_fsbroker.oauth');
  window.received = [];
  channel.onmessage = event => {
    window.received.push(event.data);
    const state = new URLSearchParams(event.data.search).get('state');
    if (ack) channel.postMessage({ type: 'oauth-ack', state, ok: true, message: 'Signed in to analysis.' });
  };
  resolve(true);
})"""


def _status(url: str) -> int:
    """The HTTP status of a GET without any Jupyter token or cookie (redirects not followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("jupyterlab", [{"base_url": "/"}, {"base_url": "/user/ada/"}], indirect=True)
def test_jupyterlab_serves_the_page_without_login(jupyterlab: JupyterLab) -> None:
    assert _status(jupyterlab.url + PAGE + QUERY) == 200
    assert _status(jupyterlab.url + "lab") in (302, 403)  # the rest of JupyterLab wants a login
    with urllib.request.urlopen(jupyterlab.url + PAGE, timeout=10) as response:
        assert response.headers.get_content_type() == "text/html"
        assert b"oauth-callback.js" in response.read()


@pytest.mark.parametrize("jupyterlab", [{"base_url": "/user/ada/"}], indirect=True)
def test_a_tab_that_acknowledges_gets_the_query_and_the_page_says_signed_in(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    page.goto(jupyterlab.url + PAGE)  # a tab of the same origin
    page.evaluate(_LISTENER, True)
    callback = page.context.new_page()
    callback.goto(jupyterlab.url + PAGE + QUERY)
    expect(callback.locator("#fsbroker-oauth-title")).to_have_text("Return to your notebook")
    expect(callback.locator("#fsbroker-oauth-message")).to_have_text("Signed in to analysis.")
    assert page.evaluate("window.received") == [{"type": "oauth-redirect", "search": QUERY}]
    assert callback.url == jupyterlab.url + PAGE  # the code left the address bar
    assert "c0de" not in callback.evaluate("location.href + document.referrer")
    assert not callback.locator("#fsbroker-oauth-paste").is_visible()


def test_with_no_tab_to_take_it_the_page_shows_the_address_to_paste(
    jupyterlab: JupyterLab, page: Any
) -> None:
    from playwright.sync_api import expect

    page.goto(jupyterlab.url + PAGE)
    page.evaluate(_LISTENER, False)  # a tab that hears it but has no sign-in waiting: it stays silent
    callback = page.context.new_page()
    callback.goto(jupyterlab.url + PAGE + QUERY)
    assert callback.url == jupyterlab.url + PAGE
    expect(callback.locator("#fsbroker-oauth-paste")).to_be_visible(timeout=15_000)
    expect(callback.locator("#fsbroker-oauth-title")).to_have_text("Sign-in not handed over")
    assert callback.locator("#fsbroker-oauth-address").input_value() == jupyterlab.url + PAGE + QUERY
    assert page.evaluate("window.received") == [{"type": "oauth-redirect", "search": QUERY}]
    # The history keeps no entry with the code: the query was replaced, not pushed.
    callback.go_back()
    assert "c0de" not in callback.url
    callback.go_forward()
    assert callback.url == jupyterlab.url + PAGE
