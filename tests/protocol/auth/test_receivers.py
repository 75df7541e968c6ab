"""The loopback receiver, with real sockets: only the awaited redirect completes a sign-in."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest

from jupyter_fsbroker.protocol.auth import LoopbackReceiver


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


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
        assert (
            await asyncio.to_thread(get, base + "?code=the-code&state=the-state&iss=https%3A%2F%2Fas") == 200
        )
        answer = await waiting
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
