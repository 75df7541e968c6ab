"""A server that keeps asking for more scope than the authorization server grants (oidc-provider).

The example analysis server runs with ``--auth-scope mcp:admin``, a scope the authorization
server knows but withholds (``--withheld-scope``): each sign-in gives a token without it, and
the server answers ``403 insufficient_scope`` (a step-up). Past :attr:`OAuth.max_step_ups` the
connection fails with :class:`SignInError` ``step_up_limit``; where the authorization server
does not know the scope at all, it refuses the registration (``registration_refused``). Either
way nothing is left behind (no task, socket or listener) and the broker goes on serving
other servers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.protocol import connect, open_connection
from jupyter_fsbroker.protocol.auth import OAuth, SignIn, SignInError
from tests.interop.authorization_server import authorization_server, require_chromium, sign_in_as_a_person
from tests.support import leaks
from tests.support.servers import analysis_server_http


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("authority_args", "kind", "asked"),
    [
        # The scope is known but withheld: the first sign-in and two step-ups, then no more.
        (("--withheld-scope", "mcp:admin"), "step_up_limit", 3),
        # The scope is unknown: the authorization server refuses the client that asks for it.
        ((), "registration_refused", 0),
    ],
    ids=["withheld", "unknown"],
)
async def test_a_scope_the_authorization_server_does_not_grant_fails_the_connection_cleanly(
    broker: Broker, tmp_path: Path, authority_args: tuple[str, ...], kind: str, asked: int
) -> None:
    require_chromium()
    sign_ins = tmp_path / "sign-ins.log"
    sign_ins.write_text("")
    browsers: list[subprocess.Popen[bytes]] = []

    def on_sign_in(sign_in: SignIn) -> None:
        browsers.append(sign_in_as_a_person(sign_in.authorization_url, sign_ins))

    settings = OAuth(store=tmp_path / "oauth", open_browser=False, on_sign_in=on_sign_in, max_step_ups=2)
    with (
        authorization_server(tmp_path, *authority_args) as authority,
        analysis_server_http("--auth-issuer", authority.issuer, "--auth-scope", "mcp:admin") as strict,
        analysis_server_http() as plain,
    ):
        before = leaks.snapshot()
        with pytest.raises(SignInError) as raised:
            await connect(broker, "strict", url=strict.url, auth=settings, timeout=240)
        assert raised.value.kind == kind, raised.value
        for browser in browsers:
            assert browser.wait(60) == 0
        assert len(sign_ins.read_text().splitlines()) == asked
        left = leaks.wait_gone(leaks.appeared_since(before), 10)
        assert not left, left.describe()
        assert broker.connections() == ()
        async with open_connection(broker, "plain", url=plain.url) as conn:
            assert "profile_csv" in {tool["name"] for tool in conn.tools}
