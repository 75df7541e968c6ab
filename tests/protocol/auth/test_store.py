"""The token store: files only the user can read, written whole, and damage read as "signed out"."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from jupyter_fsbroker.protocol.auth import FileTokenStore, MemoryTokenStore, ResourceStorage, StoredSignIn

RESOURCE = "https://mcp.example.com/mcp"


@pytest.mark.anyio
async def test_tokens_and_client_are_kept_with_their_expiry_in_a_file_only_the_user_reads(
    tmp_path: Path,
) -> None:
    store = FileTokenStore(tmp_path / "oauth")
    storage = ResourceStorage(store, RESOURCE)
    await storage.set_client_info(
        OAuthClientInformationFull(client_id="c1", client_secret="s3cret", redirect_uris=None)
    )
    await storage.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1", expires_in=3600))
    path = store.path_of(RESOURCE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    # Another process (a new storage over the same folder) sees the same sign-in.
    again = ResourceStorage(FileTokenStore(tmp_path / "oauth"), RESOURCE)
    tokens = await again.get_tokens()
    assert tokens is not None and tokens.access_token == "at-1" and tokens.refresh_token == "rt-1"
    # The expiry is absolute: what is left of the hour, not a fresh hour.
    assert tokens.expires_in is not None and 3590 <= tokens.expires_in <= 3600
    client = await again.get_client_info()
    assert client is not None and client.client_secret == "s3cret"


@pytest.mark.anyio
async def test_an_expired_token_reads_as_expired(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    store.save(StoredSignIn(RESOURCE, tokens={"access_token": "old", "token_type": "Bearer"}, expires_at=1.0))
    tokens = await ResourceStorage(store, RESOURCE).get_tokens()
    assert tokens is not None and tokens.expires_in is not None and tokens.expires_in < 0


@pytest.mark.parametrize(
    "content", [b"{not json", b"[]", b'{"version": 99, "resource": "%s"}' % RESOURCE.encode()]
)
def test_a_damaged_or_unknown_file_reads_as_signed_out_and_is_left_alone(
    tmp_path: Path, content: bytes
) -> None:
    store = FileTokenStore(tmp_path)
    path = store.path_of(RESOURCE)
    path.write_bytes(content)
    assert store.load(RESOURCE) is None
    assert path.read_bytes() == content


def test_forget_deletes_the_record(tmp_path: Path) -> None:
    for store in (FileTokenStore(tmp_path), MemoryTokenStore()):
        store.save(StoredSignIn(RESOURCE, tokens={"access_token": "x", "token_type": "Bearer"}))
        assert store.forget(RESOURCE) is True
        assert store.load(RESOURCE) is None
        assert store.forget(RESOURCE) is False


def test_a_record_is_shown_without_its_secrets() -> None:
    record = StoredSignIn(
        RESOURCE,
        issuer="https://as.example.com",
        client={"client_id": "c", "client_secret": "s3cret"},
        tokens={"access_token": "at-secret", "refresh_token": "rt-secret"},
    )
    shown = repr(record)
    assert "secret" not in shown and RESOURCE in shown and record.signed_in
