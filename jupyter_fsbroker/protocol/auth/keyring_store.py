"""Sign-in secrets in the system keyring, where one works; the rest of the record in the file.

:class:`KeyringTokenStore` keeps a record's secrets (the access and refresh tokens, the client
secret) in the keyring under service :data:`SERVICE`, user = the record's key (its file's name
without ``.json``), and the rest in the file of :class:`~.store.FileTokenStore`, marked
``"secrets": "keyring"``.

The keyring is optional (the ``keyring`` extra) and falls back badly on hosted notebooks: with
no D-Bus it picks ``fail.Keyring``; a locked Secret Service is chosen and then fails every call
(``InitError``); keyrings.alt's plaintext and "encrypted" files are no safer than the 0600 file.
So it is used only after a check (:func:`usable_keyring`): keyring is imported at the first
sign-in only (the first save, or the first read of a record marked as kept there), the
backends above are refused, and a set/get/delete round trip must work in a worker thread
within :data:`TIMEOUT`. Any later failure of the keyring falls back to the file for the rest
of the process, with one warning (which never holds a secret): a sign-in never fails because
of the keyring, at worst the person signs in again.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from .store import FileTokenStore, MemoryTokenStore, StoredSignIn, TokenStore, body_of, record_of

__all__ = ["SERVICE", "TIMEOUT", "KeyringTokenStore", "choose_store", "usable_keyring"]

log = logging.getLogger(__name__)

#: The keyring's service name for every record.
SERVICE = "jupyter_fsbroker"
#: Seconds any one keyring call (the check's round trip included) may take.
TIMEOUT = 2.0

#: The token members and client members that are secrets.
_TOKEN_SECRETS = ("access_token", "refresh_token", "id_token")
_CLIENT_SECRETS = ("client_secret",)
#: keyrings.alt's backends that are files like ours, but without its mode or atomicity.
_FILE_BACKENDS = {"keyrings.alt.file.PlaintextKeyring", "keyrings.alt.file.EncryptedKeyring"}

T = TypeVar("T")


class KeyringFailed(Exception):
    """A keyring call raised, or did not return within :data:`TIMEOUT`."""


def bounded(call: Callable[[], T], timeout: float | None = None) -> T:
    """*call*'s result, run in a daemon thread (a hung keyring never holds the process at exit).

    *timeout* defaults to :data:`TIMEOUT`.

    Raises
    ------
    KeyringFailed
        The call raised (the cause is chained) or did not return in *timeout* seconds.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # reported to the caller below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="fsbroker-keyring", daemon=True)
    worker.start()
    limit = TIMEOUT if timeout is None else timeout
    worker.join(limit)
    if worker.is_alive():
        raise KeyringFailed(f"the keyring did not answer within {limit:g} s")
    if "error" in outcome:
        error = outcome["error"]
        raise KeyringFailed(type(error).__name__) from error
    value: T = outcome["value"]
    return value


def refusal(backend: Any) -> str | None:
    """Why *backend* (a ``keyring.backend.KeyringBackend``) is not used, or ``None``."""
    from keyring.backends import fail

    name = f"{type(backend).__module__}.{type(backend).__name__}"
    if isinstance(backend, fail.Keyring):
        return "no keyring backend"
    if name in _FILE_BACKENDS:
        return f"{name} is a file, no safer than the store's own"
    try:
        priority = float(backend.priority)
    except Exception as exc:  # a backend's priority raises where it cannot work
        return f"{name} cannot work here ({type(exc).__name__})"
    if priority < 1:
        return f"{name} has priority {priority:g}"
    return None


def round_trip(backend: Any) -> None:
    """Set, get and delete a throwaway password in *backend*.

    Raises
    ------
    KeyringFailed
        A call failed or timed out, or the password read back differs.
    """
    user, password = f"probe-{secrets.token_hex(4)}", secrets.token_hex(8)
    bounded(lambda: backend.set_password(SERVICE, user, password))
    try:
        if bounded(lambda: backend.get_password(SERVICE, user)) != password:
            raise KeyringFailed("the keyring gave back another password")
    finally:
        bounded(lambda: backend.delete_password(SERVICE, user))


def usable_keyring(backend: Any = None) -> Any:
    """*backend* (default: keyring's choice for this system), if it passes the check; else ``None``.

    Each chained backend of a ``ChainerBackend`` is judged alone, and the best one that passes
    is used. Never raises: without keyring installed (or with a broken one), ``None``.
    """
    try:
        return _check(backend)
    except Exception as exc:  # a broken keyring must never fail a sign-in
        log.info("the keyring cannot be used (%s): sign-ins are kept in the file store", type(exc).__name__)
        return None


def _check(backend: Any) -> Any:
    try:
        import keyring
        from keyring.backends.chainer import ChainerBackend
    except ImportError:
        log.debug("keyring is not installed: sign-ins are kept in the file store")
        return None
    try:
        chosen = backend if backend is not None else bounded(keyring.get_keyring)
    except KeyringFailed as exc:
        log.info("no system keyring (%s): sign-ins are kept in the file store", exc)
        return None
    candidates = list(chosen.backends) if isinstance(chosen, ChainerBackend) else [chosen]
    for candidate in sorted(candidates, key=_priority, reverse=True):
        why = refusal(candidate)
        if why is None:
            try:
                round_trip(candidate)
            except KeyringFailed as exc:
                why = f"its round trip failed ({exc})"
            else:
                return candidate
        log.info("not using the keyring %s.%s: %s", type(candidate).__module__, type(candidate).__name__, why)
    return None


def _priority(backend: Any) -> float:
    try:
        return float(backend.priority)
    except Exception:  # refused later, with the reason
        return 0.0


class _System:
    """The system's keyring, checked once per process, and dropped for good at its first failure."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checked = False
        self._backend: Any = None

    def get(self) -> Any:
        with self._lock:
            if not self._checked:
                self._backend, self._checked = usable_keyring(), True
            return self._backend

    def drop(self, backend: Any) -> bool:
        """Stop using *backend*; whether it was in use (so the caller gives the one notice)."""
        with self._lock:
            dropped, self._backend = self._backend is backend and backend is not None, None
            self._checked = True
            return dropped


_SYSTEM = _System()


def choose_store(store: str | Path) -> TokenStore:
    """The store ``OAuth(store=...)`` names.

    ``"auto"``: :class:`KeyringTokenStore` (the file alone where no keyring passes the check);
    ``"keyring"``: the same, with a warning where none does; ``"file"``:
    :class:`~.store.FileTokenStore`; ``"memory"``: this process's
    :class:`~.store.MemoryTokenStore`; a folder: the file store in that folder.
    """
    if store == "memory":
        return _MEMORY
    if store == "file":
        return FileTokenStore()
    if store in ("auto", "keyring"):
        return KeyringTokenStore(insist=store == "keyring")
    return FileTokenStore(Path(store))


# One memory store per process: connections of the same process share their sign-ins.
_MEMORY = MemoryTokenStore()


class KeyringTokenStore(FileTokenStore):
    """Records in *folder*'s files, their secrets in the system keyring while it works.

    Parameters
    ----------
    folder
        The file store's folder (default :func:`~.store.default_folder`).
    backend
        The keyring backend to check and use instead of the system's (tests, or a chosen one).
    insist
        Warn (once) where no keyring passes the check: the keyring was asked for by name.
    """

    def __init__(self, folder: Path | None = None, *, backend: Any = None, insist: bool = False) -> None:
        super().__init__(folder)
        self._insist = insist
        self._given = backend  # None: the system's, checked once per process
        self._backend: Any = None
        self._checked = False
        self._lock = threading.Lock()
        self._failed = False

    def __repr__(self) -> str:
        return f"KeyringTokenStore({str(self.folder)!r})"

    def keyring(self) -> Any:
        """The backend in use, checked at the first call; ``None``: the file keeps everything."""
        with self._lock:
            if self._failed:
                return None
            first = not self._checked
            if self._given is None:
                backend = _SYSTEM.get()
            else:
                if first:
                    self._backend = usable_keyring(self._given)
                backend = self._backend
            self._checked = True
        if backend is None and first and self._insist:
            log.warning("no system keyring passes the check: sign-ins are kept in the file store")
        return backend

    def _fail(self, backend: Any, doing: str, exc: KeyringFailed) -> None:
        with self._lock:
            first = not self._failed
            self._failed = True
        if (self._given is None and _SYSTEM.drop(backend)) or (self._given is not None and first):
            log.warning(
                "the system keyring failed while %s (%s): sign-ins are kept in the file store from now on",
                doing,
                exc,
            )

    def forget(self, resource: str) -> bool:
        kept = self.keeps_secrets_elsewhere(resource)
        if not super().forget(resource):
            return False
        backend = self.keyring() if kept else None
        if backend is not None:
            key = self.key_of(resource)
            try:
                bounded(lambda: backend.delete_password(SERVICE, key))
            except KeyringFailed as exc:
                log.debug("the keyring entry of %s was not deleted (%s)", key, exc)
        return True

    def load(self, resource: str) -> StoredSignIn | None:
        data = self.read_body(resource)
        if data is None:
            return None
        record = record_of(resource, data)
        if data.get("secrets") != "keyring":
            return record
        kept = self._secrets_of(resource)
        if kept is None:
            # Signed out, and the client forgotten too: a client without its secret cannot
            # sign in, so it registers (or is set from the settings) again.
            return replace(record, tokens=None, expires_at=None, client=None)
        return replace(
            record,
            tokens=_merged(record.tokens, kept.get("tokens")),
            client=_merged(record.client, kept.get("client")),
        )

    def _secrets_of(self, resource: str) -> dict[str, Any] | None:
        backend = self.keyring()
        if backend is None:
            return None
        try:
            text = bounded(lambda: backend.get_password(SERVICE, self.key_of(resource)))
        except KeyringFailed as exc:
            self._fail(backend, "reading a sign-in", exc)
            return None
        try:
            kept = json.loads(text) if text else None
        except ValueError:
            kept = None
        return kept if isinstance(kept, dict) else None

    def save(self, record: StoredSignIn) -> None:
        backend = self.keyring()
        if backend is not None:
            tokens, token_secrets = _split(record.tokens, _TOKEN_SECRETS)
            client, client_secrets = _split(record.client, _CLIENT_SECRETS)
            kept = json.dumps({"tokens": token_secrets, "client": client_secrets})
            try:
                bounded(lambda: backend.set_password(SERVICE, self.key_of(record.resource), kept))
            except KeyringFailed as exc:
                self._fail(backend, "keeping a sign-in", exc)
            else:
                body = body_of(replace(record, tokens=tokens, client=client))
                self.write_body(record.resource, {**body, "secrets": "keyring"})
                return
        self.write_body(record.resource, body_of(record))


def _split(
    members: dict[str, Any] | None, names: tuple[str, ...]
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """*members* without *names*, and those of *names* it has."""
    if members is None:
        return None, {}
    return {k: v for k, v in members.items() if k not in names}, {
        k: members[k] for k in names if k in members
    }


def _merged(members: dict[str, Any] | None, kept: Any) -> dict[str, Any] | None:
    if members is None:
        return None
    return {**members, **kept} if isinstance(kept, dict) else members
