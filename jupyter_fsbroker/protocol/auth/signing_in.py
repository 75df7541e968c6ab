"""One server's sign-in for one connection: the provider, its loopback receiver and its store.

:func:`signing_in` is what the HTTP transport opens when a connection has
:class:`~.oauth_settings.OAuth` settings: it binds the loopback receiver unless the redirect
goes to a page (the port is in the redirect URI, which registration needs first), builds
:class:`~.provider.BrokerOAuth` on the record of the server's resource, and, when a person
must sign in, tells :attr:`OAuth.on_sign_in` the pending :class:`~.pending_sign_in.SignIn`
and opens its authorization URL with :mod:`webbrowser` in a worker thread (a ``BROWSER``
command blocks until it exits). Whichever comes first completes it: the loopback listener,
or :meth:`SignIn.complete <.pending_sign_in.SignIn.complete>` with a relayed or pasted
address. :func:`sign_out` revokes a
server's tokens at its authorization server (:mod:`.revocation`, best effort) and forgets its
record.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import webbrowser
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.auth_utils import resource_url_from_server_url

from .keyring_store import KeyringTokenStore, choose_store
from .oauth_settings import OAuth
from .pending_sign_in import SignIn
from .provider import BrokerOAuth
from .receivers import AuthorizationResponse, LoopbackReceiver
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


def _fits(registered: list[str], redirect_uri: str) -> bool:
    """Whether a client registered with *registered* may use *redirect_uri* (a loopback port may
    change, RFC 8252 §7.3; any other URI must be registered as it is)."""
    if redirect_uri in registered:
        return True
    wanted = urlsplit(redirect_uri)
    if wanted.hostname != "127.0.0.1":
        return False
    return any(
        (u.scheme, u.hostname, u.path) == (wanted.scheme, wanted.hostname, wanted.path)
        for u in map(urlsplit, registered)
    )


def _opened(opening: asyncio.Future[bool]) -> None:
    if not opening.cancelled() and opening.exception() is not None:
        log.warning("signing in: the browser did not open: %s", opening.exception())


def _verdict(receiver: LoopbackReceiver, sign_in: SignIn) -> None:
    """Once *sign_in* ended, the loopback page that brought its answer says how."""
    if sign_in.state == "completed":
        receiver.conclude(None)
    elif sign_in.state != "waiting":
        receiver.conclude(SignInError(sign_in.error or "failed").reason)


def _relay(sign_in: SignIn, listening: asyncio.Future[AuthorizationResponse]) -> None:
    """The loopback listener's answer, if it got one, completes *sign_in*."""
    if not listening.cancelled() and listening.exception() is None:
        sign_in.accept(listening.result())


async def _registration(storage: ResourceStorage, settings: OAuth, redirect_uri: str) -> None:
    """Record the pre-registered client, or drop a registration made for another redirect URI."""
    stored = await storage.get_client_info()
    if settings.client_id:
        if stored is None or stored.client_id != settings.client_id:
            await storage.set_client_info(
                OAuthClientInformationFull(
                    client_id=settings.client_id,
                    client_secret=settings.client_secret,
                    redirect_uris=[redirect_uri],  # type: ignore[list-item]
                )
            )
    elif stored is not None and not _fits([str(u) for u in stored.redirect_uris or ()], redirect_uri):
        storage.clear_client()  # registered for the loopback, now the page (or back): register again


@contextlib.asynccontextmanager
async def signing_in(url: str, settings: OAuth, server: str | None = None) -> AsyncIterator[BrokerOAuth]:
    """The provider for the server at *url*, with its receiver listening, until the block ends.

    *server* is the connection's name, for the :class:`~.pending_sign_in.SignIn` (default:
    the URL's host).
    """
    receiver_kind = settings.receiver
    receiver = LoopbackReceiver() if receiver_kind != "page" else None
    storage = ResourceStorage(store_for(settings), resource_of(url))
    if receiver is not None:
        await receiver.start()
        redirect_uri = receiver.redirect_uri
    else:
        assert settings.page_url is not None  # OAuth checks it
        redirect_uri = settings.page_url
    provider: BrokerOAuth | None = None
    try:
        await _registration(storage, settings, redirect_uri)

        async def present(authorization_url: str) -> None:
            assert provider is not None
            metadata = provider.context.oauth_metadata
            issuer = str(metadata.issuer) if metadata is not None else provider.context.auth_server_url
            sign_in = SignIn(
                server=server or urlsplit(url).hostname or url,
                url=url,
                issuer=issuer,
                resource=storage.resource,
                authorization_url=authorization_url,
                receiver=receiver_kind,
            )
            provider.sign_in = sign_in
            if receiver is not None:
                receiver.expect(sign_in.expected_state)
                sign_in.subscribe(functools.partial(_verdict, receiver))
            if settings.on_sign_in is not None:
                settings.on_sign_in(sign_in)
            if settings.open_browser:
                # Not awaited: a browser named by $BROWSER may run until the person quits it,
                # and its page waits for the flow's verdict (the loopback receiver's), which
                # needs the flow to go on waiting for the redirect meanwhile.
                opening = asyncio.get_running_loop().run_in_executor(None, webbrowser.open, authorization_url)
                opening.add_done_callback(_opened)

        async def wait() -> AuthorizationCodeResult:
            assert provider is not None and provider.sign_in is not None
            sign_in = provider.sign_in
            listening = None
            if receiver is not None:
                listening = asyncio.ensure_future(receiver.wait(settings.sign_in_timeout))
                listening.add_done_callback(functools.partial(_relay, sign_in))
            try:
                answer = await sign_in.wait(settings.sign_in_timeout)
            finally:
                if listening is not None:
                    listening.cancel()
            return AuthorizationCodeResult(code=answer.code, state=answer.state, iss=answer.iss)

        metadata = OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            scope=settings.scope,
        )
        provider = BrokerOAuth(
            server_url=url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=present,
            callback_handler=wait,
            client_metadata_url=settings.client_metadata_url,
            max_step_ups=settings.max_step_ups,
        )
        yield provider
    finally:
        if provider is not None and provider.sign_in is not None:
            provider.sign_in.cancel()  # the connection ended while a person was signing in
        if receiver is not None:
            await receiver.aclose()
