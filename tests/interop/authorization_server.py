"""The real authorization server of the sign-in tests (oidc-provider, ``oidc/as_server.mjs``), and its person.

:func:`authorization_server` runs it on the Node 24 wheel for a ``with`` block;
:func:`sign_in_as_a_person` starts what a person does with an authorization URL (the
``oidc/sign_in_browser.py`` command: Chromium fills the login and consent pages), for tests
that connect in this process rather than through the CLI's ``BROWSER``. :class:`SigningInCli`
runs the CLI's ``connect --url`` as a person would, with such a ``BROWSER``, its data folder
(so its token store) under a test's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from jupyter_fsbroker.protocol.auth import FileTokenStore
from tests.support.ci import cannot_run
from tests.support.cli import run_cli
from tests.support.node import install_or_skip
from tests.support.processes import stop_process

OIDC = Path(__file__).resolve().parent / "oidc"
CHROMIUM = "/usr/bin/chromium"
#: The ``BROWSER`` command that signs in as a person would.
SIGN_IN_BROWSER = f"{sys.executable} {OIDC / 'sign_in_browser.py'} %s"
#: The one that stops at the redirect and replays it altered (``FSBROKER_REPLAY``).
REPLAY_BROWSER = f"{sys.executable} {OIDC / 'replay_browser.py'} %s"


@dataclass(frozen=True)
class AuthorizationServer:
    """A running authorization server: its issuer URL and the file its log goes to."""

    issuer: str
    log: Path


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        cannot_run(f"the sign-in tests NOT RUN: no Chromium at {CHROMIUM}")


@contextmanager
def authorization_server(folder: Path, *args: str) -> Iterator[AuthorizationServer]:
    """oidc-provider with ``as_server.mjs`` *args*, logging to ``folder/as.log``, for the block."""
    node, installed = install_or_skip(OIDC, "oidc-provider-9.13.3", "the sign-in tests")
    script = installed / "as_server.mjs"
    shutil.copyfile(OIDC / "as_server.mjs", script)  # beside its node_modules, for the import
    log = folder / "as.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [node.node, str(script), *args], stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, log.read_text()
        yield AuthorizationServer(json.loads(line)["issuer"], log)
    finally:
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()


def sign_in_as_a_person(authorization_url: str, log: Path) -> subprocess.Popen[bytes]:
    """Start completing *authorization_url* in Chromium; each start is a line of *log*."""
    return subprocess.Popen(
        [sys.executable, str(OIDC / "sign_in_browser.py"), authorization_url],
        env={**os.environ, "FSBROKER_SIGN_IN_LOG": str(log)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )


class SigningInCli:
    """``jupyter-fsbroker connect --url URL --list-tools`` run in *folder*, with *browser* as ``BROWSER``.

    Attributes
    ----------
    env
        What the CLI's environment adds (its data and cache folders under *folder*, *extra*).
    store
        The CLI's token store.
    """

    def __init__(self, folder: Path, browser: str = SIGN_IN_BROWSER, **extra: str) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._sign_ins = folder / "sign-ins.log"
        self._sign_ins.write_text("")
        self.env = {
            "XDG_DATA_HOME": str(folder / "share"),
            "XDG_CACHE_HOME": str(folder / "cache"),
            "BROWSER": browser,
            "FSBROKER_SIGN_IN_LOG": str(self._sign_ins),
            **extra,
        }
        self.store = FileTokenStore(folder / "share" / "jupyter_fsbroker" / "oauth")

    def connect(self, url: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run("connect", "--url", url, "--list-tools", timeout=timeout)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, timeout=timeout, env=self.env, cwd=self.folder)

    def asked(self) -> int:
        """How many sign-ins a person was asked for so far."""
        return len(self._sign_ins.read_text().splitlines())
