"""No token or secret in any output: every secret the authorization server issued, grepped for everywhere.

The authorization server (oidc-provider, ``tests/interop/oidc/as_server.mjs --secrets-file``)
writes each secret it hands out to a file only this test reads: access, refresh and ID
tokens, the client secret and registration access token of each dynamic registration,
authorization codes. With the secrets of the token store, they are looked for, raw, base64
and URL-encoded, in what a person or an operator gets to see (:func:`find_leaks`).

The case here is the CLI's whole flow: a sign-in, a call that reads a shared file (audited),
a call after the access token expired at the authorization server (a refresh), a sign-in to a
second server refused for a wrong ``iss``, and a sign-out. Its outputs: the audit file, every
CLI run's stdout and stderr (which carry the text of every exception the CLI reports), both
servers' logs and the authorization server's.

The notebook's case runs the same in a real kernel (:mod:`tests.support.notebook_kernel`): a
sign-in from the card (a refused address pasted first, then the right one), a call, a call after
expiry (a refresh), a snapshot of the JupyterLab panel's comm, ``%fsbroker signout``, a call on
the closed connection and a second server's sign-in cancelled from the panel. Its outputs:
every IOPub message (outputs, widget states, the panel's messages), the notebook saved with
nbformat from them, the audit file, the kernel process's own output, the broker's log (its
loggers and mcp's and httpx's at DEBUG), both servers' logs, the authorization server's, and
the text of every exception (failed cells, refusals on the card and the panel).

Positive controls, so that the grep can fail: the secrets file has several entries, the store
file is found to hold the access token, and a token planted (base64) in a scratch log is
found.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from jupyter_fsbroker.protocol.auth import FileTokenStore, resource_of
from tests.interop.authorization_server import (
    REPLAY_BROWSER,
    SigningInCli,
    authorization_server,
    require_chromium,
)
from tests.kernel.harness import Kernel
from tests.support.authserver import grants, sign_in_over_http
from tests.support.notebook_kernel import load, saved_notebook, start_notebook_kernel
from tests.support.panel_comm import Panel
from tests.support.servers import analysis_server_http
from tests.support.sign_in_card import card_parts, everything_sent, set_value, waiting

#: Shorter values are not secrets worth a grep (and would match by chance).
_MIN_SECRET = 16


def forms(secret: str) -> dict[str, str]:
    """*secret* as it could appear in an output: raw, base64 (both alphabets, unpadded too), URL-encoded."""
    raw = secret.encode()
    standard = base64.b64encode(raw).decode()
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    found = {"raw": secret, "base64": standard, "base64url": urlsafe, "url-encoded": quote(secret, safe="")}
    found["base64 unpadded"] = standard.rstrip("=")
    found["base64url unpadded"] = urlsafe.rstrip("=")
    distinct: dict[str, str] = {}
    for form, text in found.items():
        distinct.setdefault(text, form)  # a JWT is its own URL encoding: one form, named once
    return {form: text for text, form in distinct.items()}


def find_leaks(outputs: Mapping[str, str], secrets: Iterable[str]) -> list[str]:
    """``"<output>: <form> of <secret's first characters>…"`` for each secret found in each output."""
    found = []
    for secret in {s for s in secrets if len(s) >= _MIN_SECRET}:
        for form, text in forms(secret).items():
            for name, output in outputs.items():
                if text in output:
                    found.append(f"{name}: {form} of {secret[:6]}…")
    return sorted(found)


def issued_secrets(path: Path) -> list[str]:
    """The values the authorization server wrote to its secrets file."""
    return [json.loads(line)["value"] for line in path.read_text().splitlines()]


def stored_secrets(folder: Path) -> list[str]:
    """The secrets in every file of a token store folder."""
    found = []
    for file in folder.glob("*.json"):
        record = json.loads(file.read_text())
        for part in ("tokens", "client"):
            for key, value in (record.get(part) or {}).items():
                if key in ("access_token", "refresh_token", "id_token", "client_secret") and value:
                    found.append(value)
    return found


def jwt_expiry(token: str) -> float:
    payload = token.split(".")[1]
    return float(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"])


def test_the_cli_flow_shows_no_token_anywhere(tmp_path: Path) -> None:
    require_chromium()
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text("region,amount\nnorth,1.5\nsouth,2.5\n")
    secrets_file = tmp_path / "issued-secrets.jsonl"
    cli = SigningInCli(tmp_path)
    refused_cli = SigningInCli(
        tmp_path / "refused",
        REPLAY_BROWSER,
        FSBROKER_REPLAY="iss",
        FSBROKER_REPLAY_LOG=str(tmp_path / "r.jsonl"),
    )
    call = ["--root", f"data={data}", "--allow", "data:read", "--audit", str(tmp_path / "audit.jsonl")]
    call += ["--call", "profile_csv", "--args", '{"path": "data/sales.csv"}']
    runs = []
    with (
        authorization_server(tmp_path, "--token-ttl", "4", "--secrets-file", str(secrets_file)) as authority,
        analysis_server_http("--auth-issuer", authority.issuer) as a,
        analysis_server_http("--auth-issuer", authority.issuer) as b,
    ):
        runs.append(cli.run("connect", "--url", a.url, *call))
        assert runs[-1].returncode == 0 and cli.asked() == 1, runs[-1].stderr
        record = cli.store.load(resource_of(a.url))
        assert record is not None and record.tokens is not None
        access = record.tokens["access_token"]
        # Past the token's expiry at the authorization server: a moment on its clock, no event
        # to wait on.
        time.sleep(max(0.0, jwt_expiry(access) + 1 - time.time()))
        runs.append(cli.run("connect", "--url", a.url, *call))
        assert runs[-1].returncode == 0 and cli.asked() == 1, runs[-1].stderr
        assert "grant refresh_token" in authority.log.read_text()
        runs.append(refused_cli.connect(b.url))
        assert runs[-1].returncode != 0 and "iss mismatch" in runs[-1].stderr, runs[-1].stderr
        store_text = cli.store.path_of(resource_of(a.url)).read_text()
        current = json.loads(store_text)["tokens"]["access_token"]
        assert current != access  # refreshed
        store_secrets = stored_secrets(cli.store.folder)
        runs.append(cli.run("signout", a.url))
        assert runs[-1].returncode == 0, runs[-1].stderr
        server_logs = {"server A's log": a.log, "server B's log": b.log}
    issued = issued_secrets(secrets_file)
    secrets = [*issued, *store_secrets]
    outputs = {
        "the audit file": (tmp_path / "audit.jsonl").read_text(),
        "the authorization server's log": authority.log.read_text(),
        **server_logs,
    }
    for number, run in enumerate(runs, 1):
        outputs[f"run {number}'s stdout"] = run.stdout
        outputs[f"run {number}'s stderr"] = run.stderr
    assert outputs["the audit file"].count("\n") >= 2  # the two calls' reads were audited

    # The controls: the grep finds what is there.
    kinds = [json.loads(line)["kind"] for line in secrets_file.read_text().splitlines()]
    assert len(issued) >= 3 and {"access_token", "refresh_token", "client_secret"} <= set(kinds), kinds
    assert find_leaks({"the store file": store_text}, [current]) == [f"the store file: raw of {current[:6]}…"]
    assert current in issued and access in issued
    planted = tmp_path / "scratch.log"
    planted.write_text(f"debug: sent {base64.b64encode(record.tokens['refresh_token'].encode()).decode()}\n")
    assert find_leaks({"scratch": planted.read_text()}, secrets)

    assert find_leaks(outputs, secrets) == []


#: The kernel's loggers that a flow's log file gets, all of them at DEBUG.
_LOGGERS = ("jupyter_fsbroker", "mcp", "httpx", "httpx2", "httpcore")


@pytest.fixture
def notebook(tmp_path: Path, _jupyter_loop: object) -> Iterator[Kernel]:
    """A kernel: its own output to ``kernel.log``, its audit to ``audit.jsonl``, its log to ``broker.log``."""
    config = f"c.FSBroker.audit_file = {str(tmp_path / 'audit.jsonl')!r}\n"
    kernel = start_notebook_kernel(tmp_path / "kernel", ipython_config=config, log=tmp_path / "kernel.log")
    try:
        kernel.run(
            "import logging\n"
            f"_handler = logging.FileHandler({str(tmp_path / 'broker.log')!r})\n"
            f"for _name in {_LOGGERS!r}:\n"
            "    logging.getLogger(_name).setLevel(logging.DEBUG)\n"
            "    logging.getLogger(_name).addHandler(_handler)"
        )
        yield kernel
    finally:
        if kernel.km.has_kernel:  # the test ends it to read its output
            kernel.shutdown(now=True)


def failure_text(failure: dict[str, object] | None) -> str:
    assert failure is not None
    return "\n".join([str(failure.get("ename")), str(failure.get("evalue")), *map(str, failure["traceback"])])  # type: ignore[call-overload]


def test_the_notebook_flow_shows_no_token_anywhere(tmp_path: Path, notebook: Kernel) -> None:
    kernel = notebook
    secrets_file = tmp_path / "issued-secrets.jsonl"
    store = FileTokenStore(Path(kernel.env["XDG_DATA_HOME"]) / "jupyter_fsbroker" / "oauth")
    exceptions: dict[str, str] = {}
    with (
        authorization_server(tmp_path, "--token-ttl", "4", "--secrets-file", str(secrets_file)) as authority,
        analysis_server_http("--auth-issuer", authority.issuer) as a,
        analysis_server_http("--auth-issuer", authority.issuer) as b,
    ):
        load(kernel)
        kernel.run('broker.allow("data/sales.csv")')
        panel = Panel(kernel, subshell_id=kernel.create_subshell())
        cell = kernel.submit(f"hosted = broker.connect('hosted', url={a.url!r})")
        card = kernel.wait_widget("fsbroker-signin")
        url, paste, submit, status = card_parts(kernel, card)
        assert waiting(panel.state(waiting)) is not None
        address = sign_in_over_http(url, parse_qs(urlsplit(url).query)["redirect_uri"][0])
        # A refused address first: another authorization server's iss, pasted into the card.
        refused = re.sub(r"iss=[^&]+", "iss=http%3A%2F%2Fevil.example.com", address)
        set_value(kernel, paste, refused, panel.subshell_id)
        kernel.click(submit, subshell_id=panel.subshell_id)
        kernel.wait_for(lambda: "iss mismatch" in str(status.state.get("value")), 30, "the card to refuse")
        exceptions["the card's refusal"] = str(status.state["value"])
        set_value(kernel, paste, address, panel.subshell_id)
        kernel.click(submit, subshell_id=panel.subshell_id)
        kernel.wait(cell, 120).check()
        profile = "hosted.call_tool('profile_csv', {'path': 'data/sales.csv'}).data['rows']"
        assert kernel.value(profile) == 4
        record = store.load(resource_of(a.url))
        assert record is not None and record.tokens is not None
        access = record.tokens["access_token"]
        # Past the token's expiry at the authorization server: a moment on its clock, no event
        # to wait on.
        time.sleep(max(0.0, jwt_expiry(access) + 1 - time.time()))
        assert kernel.value(profile) == 4
        assert grants(authority, "refresh_token") >= 1 and grants(authority, "authorization_code") == 1
        snapshot = panel.state(
            lambda s: [c for c in s["connections"] if (c["auth"] or {}).get("status") == "signed_in"]
        )
        store_text = store.path_of(resource_of(a.url)).read_text()
        current = json.loads(store_text)["tokens"]["access_token"]
        assert current != access  # refreshed
        store_secrets = stored_secrets(store.folder)
        assert kernel.run("%fsbroker signout hosted").stdout.strip() == "Signed out of hosted."
        exceptions["a call after sign-out"] = failure_text(kernel.run_fail(profile))
        # A second server's sign-in, cancelled from the panel.
        other = kernel.submit(f"broker.connect('other', url={b.url!r})")
        kernel.wait_widget("fsbroker-signin", exclude={card.comm_id})
        entry = waiting(panel.state(waiting))
        assert entry is not None
        assert panel.act("sign_out", connection=entry["id"])["ok"]
        exceptions["the cancelled sign-in"] = failure_text(kernel.wait(other, 60).failure)
        assert "cancelled" in exceptions["the cancelled sign-in"]
        server_logs = {"server A's log": a.log, "server B's log": b.log}
    issued = issued_secrets(secrets_file)
    secrets = [*issued, *store_secrets]
    outputs = {
        "IOPub": everything_sent(kernel),
        "the panel's snapshot": json.dumps(snapshot),
        "the saved notebook": saved_notebook(kernel, tmp_path / "flow.ipynb"),
        "the audit file": (tmp_path / "audit.jsonl").read_text(),
        "the broker's log": (tmp_path / "broker.log").read_text(),
        "the authorization server's log": authority.log.read_text(),
        **server_logs,
        **{f"the text of {what}": text for what, text in exceptions.items()},
    }
    kernel.shutdown(now=True)  # its own output is complete once it ended
    outputs["the kernel's own output"] = (tmp_path / "kernel.log").read_text()
    assert outputs["the audit file"].count("\n") >= 2  # the two calls' reads were audited
    assert "jupyter_fsbroker" in outputs["the broker's log"] or "HTTP Request" in outputs["the broker's log"]
    assert "fsbroker-signin" in outputs["the saved notebook"]  # the card's state was saved

    # The controls: the grep finds what is there.
    kinds = [json.loads(line)["kind"] for line in secrets_file.read_text().splitlines()]
    assert len(issued) >= 3 and {"access_token", "refresh_token"} <= set(kinds), kinds
    assert find_leaks({"the store file": store_text}, [current]) == [f"the store file: raw of {current[:6]}…"]
    assert current in issued and access in issued

    leaked = find_leaks(outputs, secrets)
    assert leaked == [], "\n".join(leaked)
