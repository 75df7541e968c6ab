"""Where sign-ins are kept: one record per resource, in a file only the user can read.

A record (:class:`StoredSignIn`) holds what a later connection needs to skip the browser: the
client's registration, the tokens with their absolute expiry (mcp's ``OAuthToken`` carries only
``expires_in``, so a restored token would otherwise count as valid forever), and the
discovery they came with (the authorization server's metadata and the protected-resource
metadata). The discovery is what makes a restored refresh token safe to use: without it, mcp
sends the refresh token to ``<MCP server origin>/token``, a server that is not the
authorization server.

:class:`FileTokenStore` keeps each record in ``<folder>/<sha256(resource)[:32]>.json``
(default folder: ``oauth/`` in the user's data folder); the folder is 0700 and each file is
written 0600 from its creation (``mkstemp``), then renamed into place, so it is never readable
by others nor half-written. A damaged or unreadable file reads as "not signed in": never a
failed connect. :class:`MemoryTokenStore` keeps them in this process only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import platformdirs
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = [
    "FileTokenStore",
    "MemoryTokenStore",
    "ResourceStorage",
    "StoredSignIn",
    "TokenStore",
    "default_folder",
]

log = logging.getLogger(__name__)

_VERSION = 1


@dataclass(frozen=True)
class StoredSignIn:
    """One resource's sign-in. Its ``repr`` shows no secret."""

    resource: str
    issuer: str | None = None
    client: dict[str, Any] | None = field(default=None, repr=False)
    tokens: dict[str, Any] | None = field(default=None, repr=False)
    expires_at: float | None = None
    discovery: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def signed_in(self) -> bool:
        return bool(self.tokens)


class TokenStore(Protocol):
    """Sign-in records by resource."""

    def load(self, resource: str) -> StoredSignIn | None: ...

    def save(self, record: StoredSignIn) -> None: ...

    def forget(self, resource: str) -> bool:
        """Delete the record of *resource*; whether there was one."""
        ...


def default_folder() -> Path:
    """``oauth/`` in the user's data folder (on Linux ``~/.local/share/jupyter_fsbroker/oauth``)."""
    return platformdirs.user_data_path("jupyter_fsbroker") / "oauth"


class FileTokenStore:
    """Records as files in *folder* (default :func:`default_folder`), readable by the user only."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else default_folder()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.folder)!r})"

    def key_of(self, resource: str) -> str:
        """The name of *resource*'s record: the first 32 hex digits of its sha256."""
        return hashlib.sha256(resource.encode()).hexdigest()[:32]

    def path_of(self, resource: str) -> Path:
        return self.folder / (self.key_of(resource) + ".json")

    def load(self, resource: str) -> StoredSignIn | None:
        data = self.read_body(resource)
        if data is None:
            return None
        if self.keeps_secrets_elsewhere(resource):
            # Kept by another store (the system keyring): without its secrets the record is no
            # sign-in, and this store never reads the keyring.
            log.warning(
                "the stored sign-in %s keeps its secrets in the system keyring; signing in again",
                self.key_of(resource),
            )
            return None
        return record_of(resource, data)

    def read_body(self, resource: str) -> dict[str, Any] | None:
        """The file of *resource* as written, or ``None`` where there is none this version can use."""
        path = self.path_of(resource)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            log.warning("the stored sign-in %s cannot be read; signing in again", path.name)
            return None
        if not isinstance(data, dict) or data.get("version") != _VERSION or data.get("resource") != resource:
            return None
        return data

    def save(self, record: StoredSignIn) -> None:
        self.write_body(record.resource, body_of(record))

    def write_body(self, resource: str, body: dict[str, Any]) -> None:
        """Replace the file of *resource* with *body* (0600 from its creation, atomically)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.folder, 0o700)
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")  # 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(body, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path_of(resource))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def forget(self, resource: str) -> bool:
        try:
            self.path_of(resource).unlink()
        except FileNotFoundError:
            return False
        return True

    def keeps_secrets_elsewhere(self, resource: str) -> bool:
        """Whether the record of *resource* was written with its secrets in the system keyring."""
        data = self.read_body(resource)
        return data is not None and data.get("secrets", "file") != "file"


def body_of(record: StoredSignIn) -> dict[str, Any]:
    """What the file of *record* holds."""
    return {
        "version": _VERSION,
        "resource": record.resource,
        "issuer": record.issuer,
        "client": record.client,
        "tokens": record.tokens,
        "expires_at": record.expires_at,
        "discovery": record.discovery,
    }


def record_of(resource: str, data: dict[str, Any]) -> StoredSignIn:
    """The record a file's *data* holds."""
    return StoredSignIn(
        resource,
        data.get("issuer"),
        data.get("client"),
        data.get("tokens"),
        data.get("expires_at"),
        data.get("discovery"),
    )


class MemoryTokenStore:
    """Records in this process only."""

    def __init__(self) -> None:
        self._records: dict[str, StoredSignIn] = {}

    def load(self, resource: str) -> StoredSignIn | None:
        return self._records.get(resource)

    def save(self, record: StoredSignIn) -> None:
        self._records[record.resource] = record

    def forget(self, resource: str) -> bool:
        return self._records.pop(resource, None) is not None


class ResourceStorage:
    """mcp's ``TokenStorage`` for one resource, over a :class:`TokenStore`, plus the discovery.

    Every change re-reads the record first, so another process's newer tokens are kept.
    """

    def __init__(self, store: TokenStore, resource: str) -> None:
        self.store = store
        self.resource = resource

    def record(self) -> StoredSignIn:
        return self.store.load(self.resource) or StoredSignIn(self.resource)

    async def get_tokens(self) -> OAuthToken | None:
        record = self.record()
        if not record.tokens:
            return None
        tokens = dict(record.tokens)
        if record.expires_at is not None:
            tokens["expires_in"] = int(record.expires_at - time.time())  # <= 0: expired
        return OAuthToken.model_validate(tokens)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        data = tokens.model_dump(mode="json", exclude_none=True, exclude={"expires_in"})
        self.store.save(replace(self.record(), tokens=data, expires_at=expires_at))

    def clear_tokens(self) -> None:
        record = self.store.load(self.resource)
        if record is not None and record.tokens:
            self.store.save(replace(record, tokens=None, expires_at=None))

    def clear_client(self) -> None:
        """Forget the client's registration (the next sign-in registers again)."""
        record = self.store.load(self.resource)
        if record is not None and record.client:
            self.store.save(replace(record, client=None))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self.record().client
        return OAuthClientInformationFull.model_validate(client) if client else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        record = self.record()
        client = client_info.model_dump(mode="json", exclude_none=True)
        self.store.save(replace(record, client=client, issuer=client_info.issuer or record.issuer))

    def discovery(self) -> dict[str, Any] | None:
        return self.record().discovery

    def set_discovery(self, discovery: dict[str, Any]) -> None:
        record = self.record()
        self.store.save(replace(record, discovery=discovery, issuer=discovery.get("issuer") or record.issuer))
