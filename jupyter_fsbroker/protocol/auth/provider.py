"""Signing in, as an ``httpx2.Auth``: mcp's ``OAuthClientProvider`` with what it lacks.

mcp 2.3's provider runs the MCP authorization flow (protected-resource and authorization-server
discovery, registration in the spec's order, PKCE, ``resource``, ``iss``, step-up). What
:class:`BrokerOAuth` changes, each a measured defect of the original:

* **No lock across requests.** mcp holds its lock from sending a request until that request's
  response headers arrive, so concurrent requests go one at a time (the project's answers to
  ``files/*`` overlap on purpose). Here the lock covers refreshing and signing in only.
* **No refresh before discovery.** After a restart mcp sends a stored refresh token (and the
  client secret) to ``<MCP server origin>/token``, having not discovered the authorization
  server yet. Here the discovery is stored with the tokens and restored with them, and
  without it there is no refresh: the tokens are dropped and the person signs in.
* **Refresh on 401.** mcp answers a 401 for a token it believes valid with a new sign-in in
  the browser; its clock runs late (it counts from the token's arrival, while ``exp`` is
  stamped at issue). Here a 401 tries the refresh token first, and tokens are refreshed a
  little before they expire; the expiry is stored, so a restored token is not valid forever.
* **Pre-registered clients authenticate.** Given an id and secret but no
  ``token_endpoint_auth_method``, mcp sends no secret; here the method comes from the
  authorization server's metadata (``client_secret_basic`` unless only ``client_secret_post``
  is listed, as RFC 8414 makes basic the default).
* **Bounded step-up.** A server that keeps answering ``403 insufficient_scope`` for the same
  scope gets :attr:`OAuth.max_step_ups` sign-ins per connection, then the request fails with
  :class:`~.sign_in_errors.SignInError` ``step_up_limit``, and with it the connection.
* **Only interactive requests open a browser.** :meth:`BrokerOAuth.non_interactive` is the auth
  of the GET stream and the DELETE at close: refresh only, a 401 is returned as it is.

Failures are raised as :class:`~.sign_in_errors.SignInError` with fixed texts (mcp's quote
``state`` values and server bodies), and mcp's own log line for a failed flow ("OAuth flow
error", logged with its traceback) keeps its words but loses the exception.

The subclass uses mcp's private methods (``_auth_flow``, ``_initialize``,
``_handle_token_response``, ``_refresh_token``, ``_handle_refresh_response``,
``_add_auth_header``, ``context``), as mcp's own extensions do; the package pins mcp to 2.3.x
and a test guards their signatures.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

from .pending_sign_in import SignIn
from .revocation import token_endpoint_auth_method
from .sign_in_errors import SignInError, sign_in_error
from .store import ResourceStorage

__all__ = ["BrokerOAuth"]

log = logging.getLogger(__name__)

#: Refresh this many seconds before the expiry (a tenth of the lifetime for short-lived tokens).
EARLY_REFRESH = 60.0


class _WithoutFlowErrorText(logging.Filter):
    """Drops the exception from mcp's "OAuth flow error" records (it quotes state values, bodies)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.msg == "OAuth flow error":
            record.exc_info = None
            record.exc_text = None
        return True


logging.getLogger("mcp.client.auth.oauth2").addFilter(_WithoutFlowErrorText())


class BrokerOAuth(OAuthClientProvider):
    """mcp's provider with the changes of the module docstring.

    Takes mcp's arguments, and *max_step_ups*; the storage should be a
    :class:`~.store.ResourceStorage` (the discovery is kept there).
    """

    def __init__(self, *args: Any, max_step_ups: int = 2, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_step_ups = max_step_ups
        self._step_ups: dict[str, int] = {}
        #: The latest sign-in a person was asked for (set by whoever presents it).
        self.sign_in: SignIn | None = None
        #: How many times a person was asked to sign in, and how many refreshes worked.
        self.sign_ins = 0
        self.refreshes = 0
        context = self.context
        update_token_expiry = context.update_token_expiry
        prepare_token_auth = context.prepare_token_auth

        def early_expiry(token: OAuthToken) -> None:
            update_token_expiry(token)
            if context.token_expiry_time is not None and token.expires_in is not None:
                context.token_expiry_time -= min(EARLY_REFRESH, token.expires_in / 10)

        def with_method(data: dict[str, str], headers: dict[str, str] | None = None) -> Any:
            info = context.client_info
            if info is not None and info.token_endpoint_auth_method is None and info.client_secret:
                metadata = context.oauth_metadata
                supported = metadata.token_endpoint_auth_methods_supported if metadata else None
                method = token_endpoint_auth_method(None, info.client_secret, supported)
                context.client_info = info.model_copy(update={"token_endpoint_auth_method": method})
            return prepare_token_auth(data, headers)

        # Instance attributes over the dataclass's methods: the context is mcp's, built in
        # the base constructor, and these two are its only points of call.
        context.update_token_expiry = early_expiry  # type: ignore[method-assign]
        context.prepare_token_auth = with_method  # type: ignore[method-assign]

    def __repr__(self) -> str:
        return f"BrokerOAuth({self.context.server_url!r}, issuer={self.context.auth_server_url!r})"

    def non_interactive(self) -> httpx2.Auth:
        """The auth for requests that must never ask a person: refresh only."""
        return _NonInteractive(self)

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)
        storage = self.context.storage
        discovery = storage.discovery() if isinstance(storage, ResourceStorage) else None
        if discovery and self.context.oauth_metadata is None:
            try:
                self.context.oauth_metadata = OAuthMetadata.model_validate(discovery["as"])
                self.context.auth_server_url = discovery.get("issuer")
                if discovery.get("prm"):
                    prm = ProtectedResourceMetadata.model_validate(discovery["prm"])
                    self.context.protected_resource_metadata = prm
            except (KeyError, ValueError):
                self.context.oauth_metadata = None
        if self.context.oauth_metadata is None and self.context.current_tokens is not None:
            # Tokens without the authorization server they came from: never refreshed at a guess.
            self.context.clear_tokens()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        if self.sign_in is not None:
            self.sign_in.finish()
        storage = self.context.storage
        metadata = self.context.oauth_metadata
        if isinstance(storage, ResourceStorage) and metadata is not None:
            prm = self.context.protected_resource_metadata
            storage.set_discovery(
                {
                    "issuer": str(metadata.issuer),
                    "as": metadata.model_dump(mode="json", exclude_none=True),
                    "prm": prm.model_dump(mode="json", exclude_none=True) if prm else None,
                }
            )

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        refreshed = await super()._handle_refresh_response(response)
        storage = self.context.storage
        if not refreshed and isinstance(storage, ResourceStorage):
            storage.clear_tokens()  # refused: a later connection must not try it again
        return refreshed

    async def _perform_authorization(self) -> httpx2.Request:
        self.sign_ins += 1
        return await super()._perform_authorization()

    def _can_refresh(self) -> bool:
        return self.context.can_refresh_token() and self.context.oauth_metadata is not None

    def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        return self._flow(request, interactive=True)

    async def _flow(
        self, request: httpx2.Request, *, interactive: bool
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        try:
            async with self.context.lock:
                if not self._initialized:
                    await self._initialize()
                version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
                if version:
                    self.context.protocol_version = version
                if not self.context.is_token_valid() and self._can_refresh():
                    refresh = await self._refresh_token()
                    self.refreshes += await self._handle_refresh_response((yield refresh))
                if self.context.is_token_valid():
                    self._add_auth_header(request)
            sent = request.headers.get("authorization")
            response = yield request
            if response.status_code == 401 and self._can_refresh():
                async with self.context.lock:
                    # Another request may have refreshed meanwhile: then only resend.
                    current = self.context.current_tokens
                    if current is not None and f"Bearer {current.access_token}" == sent:
                        refresh = await self._refresh_token()
                        self.refreshes += await self._handle_refresh_response((yield refresh))
                    refreshed = self.context.is_token_valid()
                if refreshed:
                    self._add_auth_header(request)
                    response = yield request
            # Each round is mcp's own flow (sign in or step up, then resend once), handed the
            # response in hand rather than resending. A resent request refused for scope again
            # starts another round, up to the step-up limit; refused with 401 again, it is not
            # (a server that takes no token of this authorization server would ask forever).
            rounds = 0
            while interactive and (_is_step_up(response) or (response.status_code == 401 and not rounds)):
                rounds += 1
                if _is_step_up(response):
                    self._count_step_up(response)
                if self.context.oauth_metadata is None:
                    self.context.clear_tokens()
                inner = super()._auth_flow(request)
                in_hand: httpx2.Response | None = response
                try:
                    outgoing = await inner.__anext__()
                    while True:
                        if outgoing is request and in_hand is not None:
                            reply, in_hand = in_hand, None
                        else:
                            reply = yield outgoing
                            if outgoing is request:
                                response = reply
                        outgoing = await inner.asend(reply)
                except StopAsyncIteration:
                    pass
                finally:
                    await inner.aclose()
                if in_hand is not None:
                    return  # mcp's flow ended without resending the request
        except (OAuthFlowError, TimeoutError, SignInError) as exc:
            error = sign_in_error(exc, self.context.server_url)
            if self.sign_in is not None:
                self.sign_in.fail(error.kind)
            if error is exc:
                raise
            raise error from None

    def _count_step_up(self, response: httpx2.Response) -> None:
        """Count a step-up for the scope *response* asks for; past the limit, fail the request."""
        scope = extract_field_from_www_auth(response, "scope") or ""
        self._step_ups[scope] = self._step_ups.get(scope, 0) + 1
        if self._step_ups[scope] > self.max_step_ups:
            # Failing the request fails the transport: a server that keeps refusing the
            # scopes granted would refuse every later call too.
            log.warning("the server keeps asking for scope %r; not asking the person again", scope)
            raise SignInError("step_up_limit", self.context.server_url)


def _is_step_up(response: httpx2.Response) -> bool:
    """Whether *response* asks for more scope (``403`` with ``error="insufficient_scope"``)."""
    return (
        response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


class _NonInteractive(httpx2.Auth):
    """:meth:`BrokerOAuth.non_interactive`."""

    def __init__(self, provider: BrokerOAuth) -> None:
        self._provider = provider

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self._provider._flow(request, interactive=False)
        try:
            outgoing = await flow.__anext__()
            while True:
                outgoing = await flow.asend((yield outgoing))
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
