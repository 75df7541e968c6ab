"""The loopback receiver, with real sockets: only the awaited redirect completes a sign-in, and
the browser's page says how the sign-in ended."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest

from jupyter_fsbroker.protocol.auth import LoopbackReceiver, SignInError


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def get(url: str) -> int:
    return fetch(url)[0]


@pytest.mark.anyio
async def test_only_the_awaited_state_completes_and_each_sign_in_takes_one_answer() -> None:
    receiver = LoopbackReceiver()
    await receiver.start()
    try:
        assert receiver.redirect_uri == f"http://127.0.0.1:{receiver.port}/callback"
        receiver.expect("the-state")
        base = receiver.redirect_uri
        assert (
            await asyncio.to_thread(get, base.replace("/callback", "/other") + "?code=c&state=the-state")
            == 404
        )
        assert await asyncio.to_thread(get, base + "?code=stray&state=another") == 404
        waiting = asyncio.ensure_future(receiver.wait(10))
        page = asyncio.ensure_future(
            asyncio.to_thread(get, base + "?code=the-code&state=the-state&iss=https%3A%2F%2Fas")
        )
        answer = await waiting
        receiver.conclude(None)
        assert await page == 200
        assert (answer.code, answer.state, answer.iss) == ("the-code", "the-state", "https://as")
        assert "the-code" not in repr(answer)
        # The same answer again: nobody waits for it any more.
        assert await asyncio.to_thread(get, base + "?code=the-code&state=the-state") == 404
    finally:
        await receiver.aclose()


@pytest.mark.anyio
async def test_waiting_ends_with_timeout_error() -> None:
    receiver = LoopbackReceiver()
    await receiver.start()
    try:
        receiver.expect("s")
        with pytest.raises(TimeoutError):
            await receiver.wait(0.05)
    finally:
        await receiver.aclose()


async def answered_page(receiver: LoopbackReceiver, failure: str | None) -> tuple[int, str]:
    """The page of the awaited redirect, given the verdict *failure* once the answer was taken."""
    receiver.expect("the-state")
    waiting = asyncio.ensure_future(receiver.wait(10))
    page = asyncio.ensure_future(
        asyncio.to_thread(fetch, receiver.redirect_uri + "?code=c0de&state=the-state")
    )
    await waiting
    # From another thread, as a view's cancel would.
    await asyncio.to_thread(receiver.conclude, failure)
    return await page


@pytest.mark.anyio
async def test_the_page_says_signed_in_only_once_the_flow_says_so() -> None:
    async with LoopbackReceiver() as receiver:
        status, text = await answered_page(receiver, None)
    assert status == 200 and "Signed in." in text, text


@pytest.mark.anyio
async def test_the_page_of_a_refused_answer_says_why_and_nothing_of_the_answer() -> None:
    reason = SignInError("issuer_mismatch").reason
    async with LoopbackReceiver() as receiver:
        status, text = await answered_page(receiver, reason)
    assert status == 400, (status, text)
    assert "Signed in" not in text and f"Sign-in failed: {reason}" in text, text
    assert "c0de" not in text and "the-state" not in text


@pytest.mark.anyio
async def test_without_a_verdict_the_page_is_neutral() -> None:
    async with LoopbackReceiver(verdict_timeout=0.05) as receiver:
        receiver.expect("s")
        waiting = asyncio.ensure_future(receiver.wait(10))
        status, text = await asyncio.to_thread(fetch, receiver.redirect_uri + "?code=c&state=s")
        await waiting
    assert status == 200 and "Sign-in received; return to jupyter-fsbroker." in text, text
    assert "Signed in" not in text


@pytest.mark.anyio
async def test_closing_the_receiver_answers_a_waiting_page() -> None:
    receiver = LoopbackReceiver()
    await receiver.start()
    receiver.expect("s")
    waiting = asyncio.ensure_future(receiver.wait(10))
    page = asyncio.ensure_future(asyncio.to_thread(fetch, receiver.redirect_uri + "?code=c&state=s"))
    await waiting
    await receiver.aclose()
    status, text = await page
    assert status == 200 and "Sign-in received" in text, text
