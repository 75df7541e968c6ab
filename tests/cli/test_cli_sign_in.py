"""``jupyter-fsbroker signout URL`` and the sign-in options (the flow itself: tests/conformance)."""

from __future__ import annotations

import sys
from pathlib import Path

from jupyter_fsbroker.protocol.auth import FileTokenStore, StoredSignIn, resource_of
from tests.support.cli import run_cli
from tests.support.servers import MODULE

URL = "https://mcp.example.com/mcp"


def test_signout_forgets_the_stored_sign_in(workdir: Path) -> None:
    store = FileTokenStore(workdir / "share" / "jupyter_fsbroker" / "oauth")  # the XDG_DATA_HOME of workdir
    store.save(StoredSignIn(resource_of(URL), tokens={"access_token": "at-secret", "token_type": "Bearer"}))
    first = run_cli("signout", URL)
    assert first.returncode == 0, first.stderr
    # Stored before any discovery: no authorization server to tell, and the CLI says so.
    assert first.stderr == (
        "jupyter-fsbroker: its authorization server offers no token revocation; "
        f"the tokens were only forgotten here\njupyter-fsbroker: signed out of {URL}\n"
    )
    assert store.load(resource_of(URL)) is None
    again = run_cli("signout", URL)
    assert again.returncode == 0 and "was not signed in" in again.stderr
    assert "at-secret" not in first.stderr + first.stdout


def test_sign_in_options_are_for_url_servers_only(workdir: Path) -> None:
    for args in (
        ("--oauth-scope", "mcp:tools", "--", sys.executable, "-m", MODULE),
        ("--oauth-client-secret", "s", "--url", URL),
        ("--oauth-client-metadata-url", "http://x/y", "--url", URL),
    ):
        out = run_cli("connect", *args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.startswith("jupyter-fsbroker: ") and out.stderr.count("\n") == 1, out.stderr
    assert run_cli("signout", "ftp://example.com").returncode == 2
