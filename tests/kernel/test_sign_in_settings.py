"""Which sign-in settings a notebook connection gets, and where its redirect comes back (no kernel)."""

from __future__ import annotations

import pytest

from jupyter_fsbroker.core.audit import AuditLog
from jupyter_fsbroker.core.errors import ConfigError
from jupyter_fsbroker.kernel.settings import ENV_CLIENT_SECRET, FSBroker
from jupyter_fsbroker.kernel.sign_ins import NotebookSignIns, PanelPage
from jupyter_fsbroker.protocol.auth import OAuth

URL = "https://mcp.example.com/mcp"
HUB = PanelPage("https://hub.example.com", "/user/ada/", callback_page=True)
LOCAL = PanelPage("http://127.0.0.1:8888", "/", callback_page=True)


def sign_ins(**traits: object) -> NotebookSignIns:
    return NotebookSignIns(FSBroker(**traits), AuditLog())


def test_url_connections_sign_in_by_default_with_the_traitlets_and_never_open_a_browser() -> None:
    book = sign_ins(oauth_client_id="pre", oauth_client_secret="s3cret", oauth_scope="mcp:tools")
    settings = book.settings_for("hosted", URL, None)
    assert settings is not None and not settings.open_browser
    assert (settings.client_id, settings.client_secret, settings.scope) == ("pre", "s3cret", "mcp:tools")
    assert settings.receiver == "loopback" and settings.on_sign_in is not None
    assert book.settings_for("hosted", URL, True) is not None
    assert book.settings_for("hosted", URL, False) is None
    assert book.settings_for("local", None, None) is None  # a command's server
    given = book.settings_for("hosted", URL, OAuth(scope="other", open_browser=True))
    assert given is not None and given.scope == "other" and not given.open_browser
    for bad in (("local", None, True), ("hosted", URL, "yes")):
        with pytest.raises(ConfigError):
            book.settings_for(*bad)


def test_the_receiver_is_the_callback_page_only_for_a_panel_on_another_machine() -> None:
    book = sign_ins()
    assert book.receiver() == "loopback"  # no panel
    book.panel_attached("local", LOCAL)
    assert book.receiver() == "loopback"  # the browser is on this machine
    book.panel_attached("hub", HUB)
    assert book.receiver() == "page"
    settings = book.settings_for("hosted", URL, None)
    assert settings is not None and settings.receiver == "page"
    assert settings.page_url == (
        "https://hub.example.com/user/ada/lab/extensions/jupyter_fsbroker/static/oauth-callback.html"
    )
    book.panel_detached("hub")
    assert book.receiver() == "loopback"
    assert (
        LOCAL.page_url == "http://127.0.0.1:8888/lab/extensions/jupyter_fsbroker/static/oauth-callback.html"
    )
    forced = sign_ins(oauth_redirect="paste")
    forced.panel_attached("hub", HUB)
    assert forced.receiver() == "paste"
    with pytest.raises(ConfigError, match="callback page"):
        sign_ins(oauth_redirect="page").settings_for("hosted", URL, None)


def test_the_client_secret_comes_from_the_environment_and_is_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_CLIENT_SECRET, "from-the-env-s3cret")
    settings = FSBroker(oauth_client_id="pre")
    assert settings.oauth_client_secret == "from-the-env-s3cret"
    shown = FSBroker.class_get_help(settings) + repr(settings)
    assert "from-the-env-s3cret" not in shown
    assert "pre" in FSBroker.class_get_help(settings)  # the control: current values are listed
    assert "s3cret" not in repr(sign_ins(oauth_client_id="pre").traitlet_settings())
