"""One server's sign-in for one connection: the provider, its loopback receiver and its store.

:func:`signing_in` is what the HTTP transport opens when a connection has
:class:`~.settings.OAuth` settings: it binds the loopback receiver (its port is in the
redirect URI, which registration needs first), builds :class:`~.provider.BrokerOAuth` on the
record of the server's resource, and, when a person must sign in, tells
:attr:`OAuth.on_sign_in` the authorization URL and opens it with :mod:`webbrowser` in a
worker thread (a ``BROWSER`` command blocks until it exits). :func:`sign_out` revokes a
server's tokens at its authorization server (:mod:`.revocation`, best effort) and forgets its
record.
"""

from __future__ import annotations

import contextlib
import logging
import webbrowser
from collections.abc import AsyncIterator, Callable
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.auth_utils import resource_url_from_server_url

from .keyring_store import KeyringTokenStore, choose_store
from .oauth_settings import OAuth
from .provider import BrokerOAuth
from .receivers import LoopbackReceiver
from .revocation import revoke
from .sign_in_errors import SignInError
from .store import FileTokenStore, ResourceStorage, TokenStore

__all__ = ["resource_of", "sign_out", "signing_in", "store_for"]

log = logging.getLogger(__name__)

#: The name the client registers under.
CLIENT_NAME = "jupyter-fsbroker"


def resource_of(url: str) -> str:
    """The resource (RFC 8707) a server URL stands for: the key of its stored sign-in."""
    return resource_url_from_server_url(url)


def store_for(settings: OAuth) -> TokenStore:
    """The store *settings* name (:func:`~.keyring_store.choose_store`)."""
    return choose_store(settings.store)


def sign_out(
    url: str, settings: OAuth | None = None, *, notice: Callable[[str], object] | None = None
) -> bool:
    """Revoke and forget the stored sign-in to the server at *url*; whether there was one.

    The tokens are revoked at the authorization server first (RFC 7009, at most
    :data:`~.revocation.REVOKE_TIMEOUT` seconds, so this blocks that long at most). Where the
    authorization server cannot be reached or offers no revocation, the record is forgotten
    anyway and *notice* is told why (default: a logged warning). The record's file goes, and
    its entry in the system keyring where the keyring kept its secrets, whichever store
    *settings* name.
    """
    store, resource = store_for(settings or OAuth()), resource_of(url)
    if isinstance(store, FileTokenStore) and store.keeps_secrets_elsewhere(resource):
        store = KeyringTokenStore(store.folder)  # written by one: it forgets the keyring entry too
    record = store.load(resource)
    if record is not None:
        why = revoke(record)
        if why is not None:
            if notice is None:
                log.warning("signing out: %s", why)
            else:
                notice(why)
    return store.forget(resource)


@contextlib.asynccontextmanager
async def signing_in(url: str, settings: OAuth) -> AsyncIterator[BrokerOAuth]:
    """The provider for the server at *url*, with its receiver listening, until the block ends."""
    receiver = LoopbackReceiver()
    storage = ResourceStorage(store_for(settings), resource_of(url))
    await receiver.start()
    try:
        if settings.client_id:
            stored = await storage.get_client_info()
            if stored is None or stored.client_id != settings.client_id:
                await storage.set_client_info(
                    OAuthClientInformationFull(
                        client_id=settings.client_id,
                        client_secret=settings.client_secret,
                        redirect_uris=[receiver.redirect_uri],  # type: ignore[list-item]
                    )
                )

        async def present(authorization_url: str) -> None:
            state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
            receiver.expect(state)
            if settings.on_sign_in is not None:
                settings.on_sign_in(url, authorization_url)
            if settings.open_browser:
                await anyio.to_thread.run_sync(webbrowser.open, authorization_url)

        async def wait() -> AuthorizationCodeResult:
            try:
                answer = await receiver.wait(settings.sign_in_timeout)
            except TimeoutError:
                raise SignInError("timed_out", url) from None
            return AuthorizationCodeResult(code=answer.code, state=answer.state, iss=answer.iss)

        metadata = OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[receiver.redirect_uri],  # type: ignore[list-item]
            scope=settings.scope,
        )
        yield BrokerOAuth(
            server_url=url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=present,
            callback_handler=wait,
            client_metadata_url=settings.client_metadata_url,
            max_step_ups=settings.max_step_ups,
        )
    finally:
        await receiver.aclose()
