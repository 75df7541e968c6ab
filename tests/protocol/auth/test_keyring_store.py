"""The secrets of a sign-in in the system keyring, where one passes the check; else the 0600 file.

The backends here are real ``keyring.backend.KeyringBackend`` subclasses (keyring's own
``fail.Keyring``, and small in-memory ones written for these tests): what keyring would hand the
store on a machine with no D-Bus, with a low-priority or broken backend, or with a working one.
The real Secret Service is tested in ``tests/interop/test_keyring_secret_service.py``.
"""

from __future__ import annotations

import json
import logging
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import KeyringLocked
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from jupyter_fsbroker.protocol.auth import (
    KeyringTokenStore,
    OAuth,
    ResourceStorage,
    StoredSignIn,
    choose_store,
    keyring_store,
    resource_of,
    sign_out,
)
from tests.support.env import run_python

URL = "https://mcp.example.com/mcp"
RESOURCE = resource_of(URL)
SECRETS = ("at-secret-1", "rt-secret-1", "client-secret-1")


class MemoryKeyring(KeyringBackend):
    """A working keyring that keeps its passwords in a dict; :attr:`broken` makes every call fail."""

    priority = 5  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}
        self.broken = False

    def _check(self) -> None:
        if self.broken:
            raise KeyringLocked("the collection is locked")

    def get_password(self, service: str, username: str) -> str | None:
        self._check()
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self._check()
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self._check()
        self.passwords.pop((service, username), None)


class LowPriorityKeyring(MemoryKeyring):
    """Works, but says it is a poor choice (keyring's own fallbacks say so with priority < 1)."""

    priority = 0.5  # type: ignore[assignment]


class HangingKeyring(MemoryKeyring):
    """Never answers a get until :attr:`release` is set (a Secret Service waiting on a prompt)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def get_password(self, service: str, username: str) -> str | None:
        self.release.wait()
        return None


async def sign_in(storage: ResourceStorage) -> None:
    """What a finished sign-in leaves in the store: a client with its secret, and tokens."""
    await storage.set_client_info(
        OAuthClientInformationFull(client_id="c1", client_secret=SECRETS[2], redirect_uris=None)
    )
    await storage.set_tokens(OAuthToken(access_token=SECRETS[0], refresh_token=SECRETS[1], expires_in=3600))


def file_text(store: KeyringTokenStore) -> str:
    return store.path_of(RESOURCE).read_text(encoding="utf-8")


@pytest.fixture
def system_keyring(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[MemoryKeyring]:
    """A working keyring as this process's system keyring, and the user's data folder in *tmp_path*."""
    backend = MemoryKeyring()
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    monkeypatch.setattr(keyring_store, "_SYSTEM", keyring_store._System())
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    yield backend
    keyring.set_keyring(previous)


def test_the_check_refuses_the_fail_backend_and_a_low_priority_one() -> None:
    assert keyring_store.usable_keyring(fail.Keyring()) is None
    low = LowPriorityKeyring()
    assert keyring_store.usable_keyring(low) is None
    assert low.passwords == {}  # refused before any round trip
    good = MemoryKeyring()
    assert keyring_store.usable_keyring(good) is good
    assert good.passwords == {}  # the round trip cleaned up after itself


def test_the_check_refuses_a_backend_that_does_not_answer_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyring_store, "TIMEOUT", 0.2)
    hanging = HangingKeyring()
    try:
        assert keyring_store.usable_keyring(hanging) is None
    finally:
        hanging.release.set()


@pytest.mark.anyio
@pytest.mark.parametrize("backend", [fail.Keyring, LowPriorityKeyring], ids=["fail", "low-priority"])
async def test_without_a_usable_keyring_the_file_keeps_everything(
    tmp_path: Path, backend: type[KeyringBackend]
) -> None:
    store = KeyringTokenStore(tmp_path / "oauth", backend=backend())
    await sign_in(ResourceStorage(store, RESOURCE))
    text = file_text(store)
    assert all(secret in text for secret in SECRETS)
    assert "secrets" not in json.loads(text)
    again = ResourceStorage(KeyringTokenStore(tmp_path / "oauth", backend=backend()), RESOURCE)
    tokens = await again.get_tokens()
    assert tokens is not None and tokens.refresh_token == SECRETS[1]


@pytest.mark.anyio
async def test_a_working_keyring_keeps_the_secrets_and_the_file_the_rest(tmp_path: Path) -> None:
    backend = MemoryKeyring()
    store = KeyringTokenStore(tmp_path / "oauth", backend=backend)
    await sign_in(ResourceStorage(store, RESOURCE))
    text = file_text(store)
    assert [secret for secret in SECRETS if secret in text] == []
    body = json.loads(text)
    assert body["secrets"] == "keyring" and body["client"]["client_id"] == "c1"
    assert body["tokens"]["token_type"] == "Bearer" and body["expires_at"] > 0
    assert stat.S_IMODE(store.path_of(RESOURCE).stat().st_mode) == 0o600
    [(service, user)] = backend.passwords
    assert (service, user) == (keyring_store.SERVICE, store.key_of(RESOURCE))
    assert all(secret in backend.passwords[(service, user)] for secret in SECRETS)
    # A later connection (a new store over the same folder and keyring) has the whole sign-in.
    again = ResourceStorage(KeyringTokenStore(tmp_path / "oauth", backend=backend), RESOURCE)
    tokens, client = await again.get_tokens(), await again.get_client_info()
    assert tokens is not None and (tokens.access_token, tokens.refresh_token) == SECRETS[:2]
    assert client is not None and client.client_secret == SECRETS[2]
    assert store.forget(RESOURCE) is True
    assert backend.passwords == {} and not store.path_of(RESOURCE).exists()


@pytest.mark.anyio
async def test_a_keyring_that_fails_later_falls_back_to_the_file_with_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = MemoryKeyring()
    store = KeyringTokenStore(tmp_path / "oauth", backend=backend)
    storage = ResourceStorage(store, RESOURCE)
    assert store.keyring() is backend  # checked: it works
    backend.broken = True  # then it is locked
    with caplog.at_level(logging.DEBUG):
        await sign_in(storage)
        await storage.set_tokens(OAuthToken(access_token="at-secret-2", refresh_token="rt-secret-2"))
    notices = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in notices] == [keyring_store.__name__], caplog.text
    assert "keyring failed" in notices[0].getMessage()
    assert not any(secret in caplog.text for secret in (*SECRETS, "at-secret-2", "rt-secret-2"))
    text = file_text(store)
    assert "rt-secret-2" in text and SECRETS[2] in text and "secrets" not in json.loads(text)


@pytest.mark.anyio
async def test_a_record_whose_keyring_cannot_be_read_reads_as_signed_out(tmp_path: Path) -> None:
    backend = MemoryKeyring()
    await sign_in(ResourceStorage(KeyringTokenStore(tmp_path / "oauth", backend=backend), RESOURCE))
    backend.broken = True
    again = ResourceStorage(KeyringTokenStore(tmp_path / "oauth", backend=backend), RESOURCE)
    assert await again.get_tokens() is None
    assert await again.get_client_info() is None  # a client without its secret is no client


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["auto", "file"])
async def test_sign_out_forgets_the_file_and_the_keyring_entry(
    system_keyring: MemoryKeyring, kind: str
) -> None:
    store = choose_store("auto")
    assert isinstance(store, KeyringTokenStore)
    await sign_in(ResourceStorage(store, RESOURCE))
    assert json.loads(file_text(store))["secrets"] == "keyring" and len(system_keyring.passwords) == 1
    assert sign_out(URL, OAuth(store=kind)) is True
    assert system_keyring.passwords == {} and not store.path_of(RESOURCE).exists()
    assert sign_out(URL, OAuth(store=kind)) is False


def test_auto_is_the_default_and_imports_keyring_at_the_first_sign_in_only(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        f"os.environ['XDG_DATA_HOME'] = {str(tmp_path)!r}\n"
        "from jupyter_fsbroker.protocol.auth import OAuth, StoredSignIn, choose_store\n"
        "store = choose_store(OAuth().store)\n"
        "assert store.load('https://mcp.example.com/mcp') is None\n"
        "print('keyring' in sys.modules)\n"
        "store.save(StoredSignIn('https://mcp.example.com/mcp', tokens={'access_token': 'a'}))\n"
        "print('keyring' in sys.modules, store.keyring())\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    # No D-Bus here, and PYTHON_KEYRING_BACKEND (tests/conftest.py) names fail.Keyring: the file.
    assert done.stdout.split() == ["False", "True", "None"]


def test_the_settings_name_the_stores() -> None:
    assert OAuth().store == "auto"
    for kind in ("auto", "keyring", "file", "memory"):
        assert OAuth(store=kind).store == kind
    with pytest.raises(ValueError, match="'auto', 'keyring', 'file', 'memory'"):
        OAuth(store="keychain")
    assert type(choose_store("keyring")) is KeyringTokenStore
    assert type(choose_store(Path("/tmp/x"))).__name__ == "FileTokenStore"
    assert choose_store("memory") is choose_store("memory")


def test_the_file_store_does_not_take_a_record_kept_in_the_keyring_for_a_sign_in(tmp_path: Path) -> None:
    backend = MemoryKeyring()
    KeyringTokenStore(tmp_path, backend=backend).save(StoredSignIn(RESOURCE, tokens={"access_token": "a"}))
    assert choose_store(tmp_path).load(RESOURCE) is None
