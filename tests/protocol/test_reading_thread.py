"""``files/*`` answered by the stdio transport's reading thread itself, over real pipes.

A lone request is answered on the thread that read it, the loop not involved;
anything else keeps its way and its order: messages for the session, requests
while another is on its way, cancellation, end of file (closing mid-request:
``test_threaded_answers``),
and a request stuck in the file system (it holds up its own connection, never
another one nor the loop).
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.pool import RequestPool
from tests.protocol.test_threaded_answers import TIMEOUT, name_of_thread, served

pytestmark = pytest.mark.anyio

READER = "fsbroker-pipe-reader"


@pytest.fixture
def pool() -> Any:
    pool = RequestPool(4, thread_name_prefix="answers")
    yield pool
    pool.shutdown(wait=True, cancel_futures=True)


def reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == READER]


async def no_reading_thread() -> None:
    with anyio.fail_after(TIMEOUT):
        while reading_threads():
            await asyncio.sleep(0.001)


async def test_a_lone_request_is_answered_by_the_reading_thread(pool: RequestPool) -> None:
    async with served(name_of_thread, pool=pool, thread=True) as server:
        for n in range(5):
            server.request(n, "files/read", path="data/f")
            answer = await server.answer()
            assert answer["result"] == {"thread": READER, "method": "files/read"}
        server.request(9, "files/stat", missing="data/nothing")
        assert (await server.answer())["error"]["data"]["error"] == "NOT_FOUND"
        await server.settled()
        assert server.loop_answers == []
        assert server.middleware.in_flight == 0
    await no_reading_thread()


async def test_a_request_while_another_runs_goes_to_a_worker_and_cancel_still_reaches_it(
    pool: RequestPool,
) -> None:
    started, release, holding = threading.Event(), threading.Event(), threading.Event()
    ran: list[tuple[str, str]] = []

    def handle(method: str, params: Any) -> dict[str, Any]:
        ran.append((params["path"], threading.current_thread().name))
        if params["path"] == "hold":
            holding.set()
            release.wait(TIMEOUT)
        if params["path"] == "slow":
            started.set()
            release.wait(TIMEOUT)
        return {"path": params["path"], "thread": threading.current_thread().name}

    async with served(handle, pool=pool, thread=True) as server:
        server.request(1, "files/read", path="slow")  # alone: the reading thread answers it
        assert await anyio.to_thread.run_sync(started.wait, TIMEOUT)
        # While it runs nothing more is read; once answered, the rest is read in order.
        server.request(2, "files/read", path="two")
        release.set()
        answers = [await server.answer(), await server.answer()]
        assert [a["id"] for a in answers] == [1, 2]
        assert answers[0]["result"]["thread"] == READER
        await server.settled()

        # With another request on its way (a consent, on the loop), a request goes a worker's
        # way; a cancel for it is read while it runs, and reaches it.
        started.clear()
        release.clear()
        server.request(10, "files/consent", path="hold")
        assert await anyio.to_thread.run_sync(holding.wait, TIMEOUT)
        server.request(3, "files/read", path="slow")
        assert await anyio.to_thread.run_sync(started.wait, TIMEOUT)
        server.cancel(3)
        server.request(4, "files/stat", path="after")  # behind the cancel: 3 is cancelled by then
        fourth = await server.answer()
        assert fourth["id"] == 4, fourth
        release.set()
        assert (await server.answer())["id"] == 10
        await server.settled()
        server.request(5, "files/stat", path="last")
        assert (await server.answer())["id"] == 5  # 3 never answered
    assert ("slow", READER) in ran


async def test_messages_for_the_session_keep_their_order_around_inline_answers(pool: RequestPool) -> None:
    async with served(name_of_thread, pool=pool, thread=True) as server:
        server.send({"method": "notifications/message", "params": {"level": "info", "data": "a"}})
        server.request(1, "files/read", path="f")
        server.send({"method": "notifications/message", "params": {"level": "info", "data": "b"}})
        server.request(2, "files/read", path="g")
        server.send({"id": 7, "method": "ping"})
        # The session takes its messages as they come, as a session does.
        taking = asyncio.gather(*[server.for_session() for _ in range(3)])
        ids = {(await server.answer())["id"] for _ in range(2)}
        assert ids == {1, 2}
        seen = await taking
        assert [m.params["data"] if m.method != "ping" else "ping" for m in seen] == ["a", "b", "ping"]
        await server.settled()


async def test_end_of_file_ends_the_stream_and_the_thread(pool: RequestPool) -> None:
    async with served(name_of_thread, pool=pool, thread=True) as server:
        server.request(1, "files/read", path="f")
        assert (await server.answer())["id"] == 1
        os.close(server.to_client)  # the server's stdout closes
        with anyio.fail_after(TIMEOUT):
            await server.middleware.transport_closed.wait()
        await no_reading_thread()


async def test_a_request_stuck_in_the_file_system_holds_up_no_other_connection(pool: RequestPool) -> None:
    started, release = threading.Event(), threading.Event()

    def handle(method: str, params: Any) -> dict[str, Any]:
        if params["path"] == "stuck":
            started.set()
            release.wait(TIMEOUT)
        return {"path": params["path"]}

    async with served(handle, pool=pool, thread=True) as one, served(handle, pool=pool, thread=True) as two:
        one.request(1, "files/read", path="stuck")
        assert await anyio.to_thread.run_sync(started.wait, TIMEOUT)
        for n in range(3):
            two.request(n, "files/read", path="free")
            assert (await two.answer())["id"] == n
        await asyncio.sleep(0)  # the loop turns meanwhile
        release.set()
        assert (await one.answer())["id"] == 1
        await one.settled()
        await two.settled()


async def test_a_flooding_server_stops_being_read_while_the_session_takes_nothing(pool: RequestPool) -> None:
    line = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}\n'
    async with served(name_of_thread, pool=pool, thread=True) as server:
        os.set_blocking(server.to_client, False)
        written = 0
        with anyio.fail_after(TIMEOUT):
            while True:  # ends once the pipe is full: the reading thread paused
                try:
                    written += os.write(server.to_client, line * 64)
                except BlockingIOError:
                    break
                await asyncio.sleep(0)
        assert written < 64 * 1024 * 1024
        # Once the session takes its messages, reading goes on, in order.
        first = await server.for_session()
        assert first.method == "notifications/message"
