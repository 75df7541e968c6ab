"""The pending sign-in: only the redirect of this sign-in completes it; a refused address loses nothing."""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import urlencode

import pytest

from jupyter_fsbroker.protocol.auth import OAuth, SignIn, SignInError, parse_address
from jupyter_fsbroker.protocol.auth.receivers import AuthorizationResponse

ISSUER = "https://as.example.com"
STATE = "st-Q1vF"


def pending() -> SignIn:
    query = urlencode({"response_type": "code", "client_id": "c1", "state": STATE, "code_challenge": "x"})
    return SignIn(
        server="analysis",
        url="https://mcp.example.com/mcp",
        issuer=ISSUER,
        resource="https://mcp.example.com/mcp",
        authorization_url=f"{ISSUER}/authorize?{query}",
        receiver="paste",
    )


def redirect(**params: str) -> str:
    return "http://127.0.0.1:5/callback?" + urlencode(params)


@pytest.mark.anyio
async def test_a_wrong_state_or_issuer_is_refused_and_the_sign_in_keeps_waiting() -> None:
    sign_in = pending()
    seen: list[str] = []
    sign_in.subscribe(lambda s: seen.append(s.state))
    for address, kind in (
        (redirect(code="c-1", state="tampered", iss=ISSUER), "state_mismatch"),
        (redirect(code="c-1", state=STATE, iss="https://evil.example.com"), "issuer_mismatch"),
        ("https://example.com/no-answer-here", "bad_address"),
    ):
        with pytest.raises(SignInError) as caught:
            sign_in.complete(address)
        assert caught.value.kind == kind
        assert "tampered" not in str(caught.value) and STATE not in str(caught.value)
    assert sign_in.state == "waiting" and not sign_in.answered and seen == []
    # The right one, pasted as its query only, from another thread: the flow gets the code.
    pasted = "?" + urlencode({"code": "c-1", "state": STATE})
    worker = threading.Thread(target=sign_in.complete, args=(pasted,))
    worker.start()
    answer = await sign_in.wait(10)
    worker.join()
    assert answer == AuthorizationResponse("c-1", STATE, None)
    assert seen == ["waiting"] and sign_in.answered
    with pytest.raises(SignInError) as again:
        sign_in.complete(redirect(code="c-2", state=STATE))
    assert again.value.kind == "not_waiting"
    sign_in.finish()
    assert sign_in.state == "completed" and seen == ["waiting", "completed"]
    sign_in.cancel()  # ended: nothing changes
    assert sign_in.state == "completed" and sign_in.error is None


@pytest.mark.anyio
async def test_cancelled_declined_and_timed_out_sign_ins_fail_the_flow_with_their_kind() -> None:
    cancelled = pending()
    waiter = asyncio.ensure_future(cancelled.wait(10))
    cancelled.cancel()
    with pytest.raises(SignInError) as caught:
        await waiter
    assert caught.value.kind == "cancelled" and cancelled.state == "cancelled"
    declined = pending()
    declined.complete(redirect(error="access_denied", state=STATE))
    assert declined.state == "cancelled" and declined.error == "cancelled"
    late = pending()
    with pytest.raises(SignInError) as timed_out:
        await late.wait(0.01)
    assert timed_out.value.kind == "timed_out" and late.state == "failed" and late.error == "timed_out"


def test_addresses_and_the_redirect_setting() -> None:
    assert parse_address(" code=a&state=b&iss=c&other=d ") == {"code": "a", "state": "b", "iss": "c"}
    assert parse_address("http://h/p?code=a&state=b#frag") == {"code": "a", "state": "b"}
    assert OAuth().receiver == "loopback"
    assert OAuth(page_url="http://127.0.0.1:8888/x.html").receiver == "page"
    assert OAuth(redirect="paste", page_url="http://127.0.0.1:8888/x.html").receiver == "paste"
    with pytest.raises(ValueError, match="page_url"):
        OAuth(redirect="page")
    with pytest.raises(ValueError, match="redirect"):
        OAuth(redirect="elsewhere")  # type: ignore[arg-type]
