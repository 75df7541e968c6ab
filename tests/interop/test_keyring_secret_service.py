"""The sign-in store with a real system keyring: gnome-keyring's Secret Service on a private D-Bus.

Each test runs its processes under ``dbus-run-session`` with a fresh ``HOME`` and data folder,
and a ``gnome-keyring-daemon`` for the secrets: unlocked (``--unlock``, the password on stdin)
it is a working keyring, as on a desktop; started without unlocking (``--start``) it is the
"falls back badly" case of hosted machines: keyring chooses it (priority 5) and then every call
fails. Debian: ``apt-get install -y gnome-keyring dbus`` (``scripts/system-packages.sh``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci import cannot_run
from tests.support.env import server_env

URL = "https://mcp.example.com/mcp"
SECRETS = ["at-secret-1", "rt-secret-1", "client-secret-1"]

#: A sign-in as a finished flow leaves it, kept by the default store.
SIGN_IN = f"""
import json, sys
from jupyter_fsbroker.protocol.auth import OAuth, StoredSignIn, choose_store, resource_of
store = choose_store(OAuth().store)
resource = resource_of({URL!r})
store.save(StoredSignIn(
    resource,
    client={{"client_id": "c1", "client_secret": {SECRETS[2]!r}}},
    tokens={{"access_token": {SECRETS[0]!r}, "refresh_token": {SECRETS[1]!r}, "token_type": "Bearer"}},
))
backend = store.keyring()
print(json.dumps({{
    "backend": None if backend is None else f"{{type(backend).__module__}}.{{type(backend).__name__}}",
    "file": store.path_of(resource).read_text(),
    "key": store.key_of(resource),
}}))
"""

#: What a later process finds, then signing out.
SIGN_OUT = f"""
import json, keyring
from jupyter_fsbroker.protocol.auth import OAuth, choose_store, resource_of, sign_out
store = choose_store(OAuth().store)
resource = resource_of({URL!r})
record = store.load(resource)
key = store.key_of(resource)
entry = keyring.get_password("jupyter_fsbroker", key)
signed_out = sign_out({URL!r})
print(json.dumps({{
    "tokens": record.tokens, "client": record.client, "entry": entry, "signed_out": signed_out,
    "entry_after": keyring.get_password("jupyter_fsbroker", key),
    "file_after": store.path_of(resource).exists(),
}}))
"""


@pytest.fixture(autouse=True)
def _no_desktop_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never the desktop's bus: each test's processes talk to their own session's only."""
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)


def in_session(tmp_path: Path, daemon: str, *scripts: str) -> tuple[list[dict[str, object]], str]:
    """Run each of *scripts* with Python, one after the other, in one D-Bus session with *daemon*:
    what each printed, and the session's stderr."""
    for tool in ("dbus-run-session", "gnome-keyring-daemon"):
        if shutil.which(tool) is None:
            cannot_run(f"SECRET SERVICE TESTS NOT RUN: no {tool} (apt-get install -y gnome-keyring dbus)")
    env = {
        **os.environ,
        **server_env(),
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "share"),
    }
    env.pop("PYTHON_KEYRING_BACKEND")  # tests/conftest.py: here the real keyring is wanted
    (tmp_path / "home").mkdir()
    for number, script in enumerate(scripts):
        (tmp_path / f"script{number}.py").write_text(script)
    runs = " && ".join(f'"$0" {tmp_path / f"script{n}.py"}' for n in range(len(scripts)))
    done = subprocess.run(
        ["dbus-run-session", "--", "bash", "-c", f"{daemon} >/dev/null 2>&1; {runs}", sys.executable],
        input="pw",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def test_an_unlocked_secret_service_keeps_the_secrets_and_sign_out_deletes_them(tmp_path: Path) -> None:
    (kept, later), _ = in_session(
        tmp_path, "gnome-keyring-daemon --unlock --components=secrets", SIGN_IN, SIGN_OUT
    )
    assert kept["backend"] == "keyring.backends.SecretService.Keyring"
    assert [secret for secret in SECRETS if secret in str(kept["file"])] == []
    assert json.loads(str(kept["file"]))["secrets"] == "keyring"
    # A later process reads the whole sign-in back, the secrets from the keyring.
    assert later["tokens"] == {
        "access_token": SECRETS[0],
        "refresh_token": SECRETS[1],
        "token_type": "Bearer",
    }
    assert later["client"] == {"client_id": "c1", "client_secret": SECRETS[2]}
    assert all(secret in str(later["entry"]) for secret in SECRETS)
    assert later["signed_out"] is True and later["entry_after"] is None and later["file_after"] is False


def test_a_locked_secret_service_leaves_the_secrets_in_the_file(tmp_path: Path) -> None:
    [kept], stderr = in_session(tmp_path, "gnome-keyring-daemon --start --components=secrets", SIGN_IN)
    assert kept["backend"] is None
    body = json.loads(str(kept["file"]))
    assert "secrets" not in body and body["tokens"]["refresh_token"] == SECRETS[1]
    assert body["client"]["client_secret"] == SECRETS[2]
    # Refused by the check, quietly: no save was tried in it and then fell back with a warning.
    assert "keyring failed" not in stderr, stderr
