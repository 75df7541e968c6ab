"""Signing in from JupyterLab to a server, with a kernel whose loopback the browser cannot reach.

The kernel runs in its own network namespace (:mod:`.remote`): it reaches the example analysis
server (run with ``--auth-issuer``) and the authorization server (oidc-provider, a real one),
and nothing it listens on is reachable from the browser, as with JupyterHub. Its sign-in's
redirect therefore comes back to the JupyterLab extension's callback page, which hands it to
the waiting kernel through the tab's panel comm. When no JupyterLab tab can take it (the
sign-in was finished in another browser profile), the page shows the address to paste into
the card. The sidebar shows the sign-in and signs out; the next connect asks again.

The page is on a loopback origin, as through an SSH tunnel: the kernel asks the browser to
fetch a probe from its loopback, which fails here, so the callback page is chosen; a kernel of
the same JupyterLab on the browser's machine gets the probe and keeps its loopback redirect.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.authserver import PASSWORD, USER, AuthorizationServer, authorization_server, grants
from tests.support.netns import NetworkNamespace
from tests.support.servers import AnalysisServer, analysis_server_http

from .lab import JupyterLab
from .notebook import Notebook
from .remote import KERNEL_NAME, remote_kernel_lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420), pytest.mark.usefixtures("labextension")]

CALLBACK = "lab/extensions/jupyter_fsbroker/static/oauth-callback.html"
#: Milliseconds for the kernel's word to reach the page (a card, the sidebar).
SHOW_TIMEOUT_MS = 30_000


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None, url
    return port


@pytest.fixture
def authorization(tmp_path: Path) -> Iterator[AuthorizationServer]:
    with authorization_server(tmp_path) as server:
        yield server


@pytest.fixture
def analysis(authorization: AuthorizationServer) -> Iterator[AnalysisServer]:
    with analysis_server_http("--auth-issuer", authorization.issuer) as server:
        yield server


@pytest.fixture
def remote(
    tmp_path_factory: pytest.TempPathFactory, authorization: AuthorizationServer, analysis: AnalysisServer
) -> Iterator[tuple[JupyterLab, NetworkNamespace]]:
    expose = [_port(authorization.issuer), _port(analysis.url)]
    with remote_kernel_lab(tmp_path_factory.mktemp("jupyterlab"), expose, labextension=True) as both:
        yield both


@pytest.fixture
def jupyterlab(remote: tuple[JupyterLab, NetworkNamespace]) -> JupyterLab:
    """The browser fixtures' JupyterLab: the one whose kernels run in the namespace."""
    return remote[0]


def _cells(url: str) -> list[str]:
    connect = f"analysis = broker.connect('analysis', url={url!r})\nprint('tools:', analysis.tool_names)"
    return [
        "%load_ext jupyter_fsbroker",
        # The page is on a loopback origin (127.0.0.1), as through an SSH tunnel: the default
        # ("auto") asks the browser to fetch a probe from the kernel's loopback, which it cannot
        # reach, so the callback page is chosen.
        "import jupyter_fsbroker as fsb\nbroker = fsb.get_broker()",
        connect,
        connect,
    ]


def _listening_inside(namespace: NetworkNamespace) -> list[int]:
    """The TCP ports listened on inside *namespace*, except the host's ports forwarded into it."""
    out = subprocess.run(namespace.command(["ss", "-Htln"]), capture_output=True, text=True, check=True)
    ports = {int(line.split()[3].rpartition(":")[2]) for line in out.stdout.splitlines() if line.strip()}
    return sorted(ports - set(namespace.expose))


def _sign_in(page: Any) -> None:
    """Complete the authorization server's login and consent pages in *page*."""
    page.fill("#login", USER)
    page.fill("#password", PASSWORD)
    page.click("#submit")
    page.click("#allow")


def _connect(page: Any, lab: JupyterLab, name: str, cells: list[str], kernel: str) -> tuple[Notebook, Any]:
    """Open a notebook of *cells* on *kernel*, run its first two, then the connect: its card's link."""
    from playwright.sync_api import expect

    notebook = Notebook(page, lab, lab.create_notebook(name, cells, kernel=kernel))
    notebook.open()
    notebook.run_and_wait(0)
    notebook.run_and_wait(1)
    # The panel has told the kernel where the page is once the sidebar shows the broker.
    page.evaluate("() => window.jupyterapp.commands.execute('fsbroker:open-sidebar')")
    expect(page.locator("#fsbroker-sidebar .fsbroker-summary")).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    notebook.run(2)
    link = notebook.cell(2).locator(".fsbroker-signin .fsbroker-signin-open")
    expect(link).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    return notebook, link


def test_sign_in_through_the_callback_page_then_sign_out_and_paste_the_next_one(
    remote: tuple[JupyterLab, NetworkNamespace],
    authorization: AuthorizationServer,
    analysis: AnalysisServer,
    page: Any,
) -> None:
    from playwright.sync_api import expect

    lab, namespace = remote
    requests: list[str] = []
    failed: list[str] = []
    page.context.on("request", lambda request: requests.append(request.url))
    page.context.on("requestfailed", lambda request: failed.append(request.url))
    # -- the callback page relays ---------------------------------------------------------
    notebook, link = _connect(page, lab, "sign-in.ipynb", _cells(analysis.url), KERNEL_NAME)
    sidebar = page.locator("#fsbroker-sidebar")
    authorize = link.get_attribute("href")
    assert authorize is not None and authorize.startswith(authorization.issuer)
    redirect_uri = parse_qs(urlsplit(authorize).query)["redirect_uri"][0]
    assert redirect_uri == lab.url + CALLBACK  # receiver "page": the kernel's loopback is out of reach
    listening = _listening_inside(namespace)
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    _sign_in(tab)
    expect(tab.locator("#fsbroker-oauth-title")).to_have_text("Return to your notebook")
    assert "code=" not in tab.url
    output = notebook.wait_done(2)
    assert "profile_csv" in output, output
    # The browser talked to JupyterLab and the authorization server; the only other thing it
    # tried is the kernel's probe, which failed: the code never went to the kernel's loopback.
    known = (f"http://127.0.0.1:{lab.port}/", authorization.issuer + "/")
    others = [u for u in requests if u.startswith("http") and not u.startswith(known)]
    assert len(others) == 1 and urlsplit(others[0]).path.startswith("/probe/"), others
    assert others[0] in failed
    for port in listening:  # and whatever the kernel listens on there refuses the browser's host
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    tab.close()

    # -- the sidebar shows it, and signs out ----------------------------------------------
    row = sidebar.locator(".fsbroker-connection", has_text="analysis")
    expect(row.locator(".fsbroker-sidebar-signin")).to_contain_text(
        f"Signed in to {authorization.issuer}", timeout=SHOW_TIMEOUT_MS
    )
    row.locator(".fsbroker-signout").click()
    expect(sidebar.locator(".fsbroker-message")).to_contain_text("Signed out of analysis.")

    # -- the next connect asks again; no JupyterLab tab takes it: the address is pasted ---------
    notebook.run(3)
    card = notebook.cell(3).locator(".fsbroker-signin")
    link = card.locator(".fsbroker-signin-open")
    expect(link).to_be_visible(timeout=SHOW_TIMEOUT_MS)
    elsewhere = page.context.browser.new_context()  # another profile: no tab shares its channel
    try:
        other = elsewhere.new_page()
        other.goto(link.get_attribute("href"))
        _sign_in(other)
        expect(other.locator("#fsbroker-oauth-paste")).to_be_visible(timeout=SHOW_TIMEOUT_MS)
        address = other.locator("#fsbroker-oauth-address").input_value()
        assert address.startswith(lab.url + CALLBACK + "?") and "code=" in address
    finally:
        elsewhere.close()
    card.locator(".fsbroker-signin-paste input").fill(address)
    card.get_by_role("button", name="Submit").click()
    output = notebook.wait_done(3)
    assert "profile_csv" in output, output
    expect(card.locator(".fsbroker-signin-paste")).to_be_hidden()
    assert address not in page.content()  # the code does not stay on the page
    assert grants(authorization, "authorization_code") == 2  # one per sign-in, none in between


def test_a_kernel_on_the_browsers_machine_keeps_the_loopback_redirect(
    remote: tuple[JupyterLab, NetworkNamespace], analysis: AnalysisServer, page: Any
) -> None:
    """The same JupyterLab and page, a kernel on the host: the probe arrives, the loopback stays."""
    from playwright.sync_api import expect

    lab, _namespace = remote
    notebook, link = _connect(page, lab, "local.ipynb", _cells(analysis.url)[:3], "python3")
    authorize = link.get_attribute("href")
    assert authorize is not None
    redirect_uri = parse_qs(urlsplit(authorize).query)["redirect_uri"][0]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", redirect_uri), redirect_uri
    with page.context.expect_page() as opened:
        link.click()
    _sign_in(opened.value)
    expect(opened.value.locator("body")).to_contain_text("Signed in")
    output = notebook.wait_done(2)
    assert "profile_csv" in output, output
