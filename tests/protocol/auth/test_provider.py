"""What ``BrokerOAuth`` changes in mcp's provider, each shown on mcp's own objects.

The whole flow against authorization servers is tests/conformance (the official suite); these
are the defects of mcp 2.3's provider that the suite does not exercise.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from jupyter_fsbroker.protocol.auth import BrokerOAuth, MemoryTokenStore, ResourceStorage, StoredSignIn

URL = "https://mcp.example.com/mcp"
ISSUER = "https://as.example.com/"
AS_METADATA = {
    "issuer": ISSUER,
    "authorization_endpoint": "https://as.example.com/authorize",
    "token_endpoint": "https://as.example.com/token",
    "response_types_supported": ["code"],
}
TOKENS = {"access_token": "at-1", "refresh_token": "rt-1", "token_type": "Bearer"}
CLIENT = {"client_id": "c1", "client_secret": "s3cret", "redirect_uris": ["http://127.0.0.1:1/callback"]}


async def nobody(url: str = "") -> Any:
    raise AssertionError("no person may be asked in this test")


def provider(record: StoredSignIn, cls: type[OAuthClientProvider] = BrokerOAuth) -> OAuthClientProvider:
    store = MemoryTokenStore()
    store.save(record)

    async def callback() -> AuthorizationCodeResult:
        raise AssertionError("no person may be asked in this test")

    return cls(
        server_url=URL,
        client_metadata=OAuthClientMetadata(redirect_uris=["http://127.0.0.1:1/callback"]),  # type: ignore[list-item]
        storage=ResourceStorage(store, URL),
        redirect_handler=nobody,
        callback_handler=callback,
    )


def signed_in(
    expires_in: float = 3600, discovery: bool = True, client: dict[str, Any] = CLIENT
) -> StoredSignIn:
    return StoredSignIn(
        URL,
        issuer=ISSUER,
        client=client,
        tokens=TOKENS,
        expires_at=time.time() + expires_in,
        discovery={"issuer": ISSUER, "as": AS_METADATA, "prm": None} if discovery else None,
    )


@pytest.mark.anyio
async def test_a_restored_refresh_token_is_never_sent_before_the_authorization_server_is_known() -> None:
    # mcp would refresh this expired token at https://mcp.example.com/token: the MCP server.
    without = provider(signed_in(expires_in=-10, discovery=False))
    flow = without.async_auth_flow(httpx2.Request("POST", URL))
    first = await flow.__anext__()
    assert first.url == URL and "authorization" not in first.headers
    await flow.aclose()
    # With the discovery stored, the refresh goes to the authorization server's token endpoint.
    with_discovery = provider(signed_in(expires_in=-10))
    flow = with_discovery.async_auth_flow(httpx2.Request("POST", URL))
    refresh = await flow.__anext__()
    assert str(refresh.url) == AS_METADATA["token_endpoint"]
    await flow.aclose()


@pytest.mark.anyio
async def test_a_restored_token_expires_when_it_was_stored_to() -> None:
    restored = provider(signed_in(expires_in=-10))
    assert isinstance(restored, BrokerOAuth)
    await restored._initialize()
    assert restored.context.current_tokens is not None and not restored.context.is_token_valid()


@pytest.mark.anyio
async def test_a_401_is_answered_with_the_refresh_token_not_a_new_sign_in() -> None:
    broker = provider(signed_in())
    flow = broker.async_auth_flow(httpx2.Request("POST", URL))
    sent = await flow.__anext__()
    assert sent.headers["authorization"] == "Bearer at-1"
    refresh = await flow.asend(httpx2.Response(401, request=sent))
    assert str(refresh.url) == AS_METADATA["token_endpoint"]
    assert b"grant_type=refresh_token" in refresh.content
    renewed = {"access_token": "at-2", "token_type": "Bearer", "expires_in": 3600}
    again = await flow.asend(httpx2.Response(200, json=renewed, request=refresh))
    assert again.url == URL and again.headers["authorization"] == "Bearer at-2"
    with pytest.raises(StopAsyncIteration):
        await flow.asend(httpx2.Response(200, request=again))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("supported", "where"),
    [(None, "header"), (["client_secret_basic"], "header"), (["client_secret_post"], "body")],
)
async def test_a_pre_registered_client_without_a_method_sends_its_secret(supported: Any, where: str) -> None:
    metadata = dict(
        AS_METADATA, **({"token_endpoint_auth_methods_supported": supported} if supported else {})
    )
    record = signed_in(expires_in=-10)
    record = StoredSignIn(URL, ISSUER, CLIENT, TOKENS, record.expires_at, {"issuer": ISSUER, "as": metadata})
    flow = provider(record).async_auth_flow(httpx2.Request("POST", URL))
    refresh = await flow.__anext__()
    if where == "header":
        assert refresh.headers["authorization"].startswith("Basic ")
    else:
        assert b"client_secret=s3cret" in refresh.content
    await flow.aclose()


@pytest.mark.anyio
async def test_requests_in_flight_do_not_wait_for_each_other() -> None:
    """mcp's provider holds its lock until each response arrives: the second request would wait."""
    broker = provider(signed_in())
    first = broker.async_auth_flow(httpx2.Request("POST", URL))
    await first.__anext__()  # the first request is sent; its answer has not come
    second = broker.async_auth_flow(httpx2.Request("POST", URL))
    with anyio.fail_after(5):
        sent = await second.__anext__()
    assert sent.headers["authorization"] == "Bearer at-1"
    await first.aclose()
    await second.aclose()


@pytest.mark.anyio
async def test_background_requests_never_ask_a_person() -> None:
    broker = provider(signed_in(discovery=True))
    assert isinstance(broker, BrokerOAuth)
    flow = broker.non_interactive().async_auth_flow(httpx2.Request("GET", URL))
    sent = await flow.__anext__()
    refresh = await flow.asend(httpx2.Response(401, request=sent))
    # The refresh is refused: the 401 goes back to the caller, no sign-in starts.
    with pytest.raises(StopAsyncIteration):
        await flow.asend(httpx2.Response(400, json={"error": "invalid_grant"}, request=refresh))
    assert broker.sign_ins == 0
