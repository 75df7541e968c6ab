"""``files/*`` answered by the desk's worker way: a worker thread that writes its own answer, over real pipes.

The middleware (and its desk) on the project's stdio pipe reader and writer, with a route to a
worker pool: the thread, cancellation (queued, running, being written), the
slot bound, answers too large for one pipe write, consent on the loop, the
middleware closing mid-request, and a server that stops reading.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.errors import NotFound
from jupyter_fsbroker.core.pool import RequestPool
from jupyter_fsbroker.protocol.desk.desk import FilesRoute
from jupyter_fsbroker.protocol.middleware import BrokerMiddleware
from jupyter_fsbroker.protocol.transports.pipes import PipeReader, PipeWriter
from tests.support.files_core import HandlerCore
from tests.support.roots import StaticRoots

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0


@dataclass
class Server:
    """The server's ends of both pipes, and the middleware between them."""

    middleware: BrokerMiddleware
    to_client: int
    from_client: Any  # a buffered binary file
    loop_answers: list[str]  # methods the loop's (async) handler answered
    session: Any  # what the middleware hands on to the session

    async def for_session(self) -> Any:
        with anyio.fail_after(TIMEOUT):
            return (await self.session.receive()).message

    def send(self, message: dict[str, Any]) -> None:
        os.write(self.to_client, json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def request(self, request_id: int, method: str, **params: Any) -> None:
        self.send({"id": request_id, "method": method, "params": params})

    def cancel(self, request_id: int) -> None:
        self.send({"method": "notifications/cancelled", "params": {"requestId": request_id}})

    async def answer(self) -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT):
            line = await anyio.to_thread.run_sync(self.from_client.readline)
        assert line.endswith(b"\n")
        result: dict[str, Any] = json.loads(line)
        return result

    async def settled(self) -> None:
        """Wait until the middleware holds no request (each finished one is told to the loop)."""
        with anyio.fail_after(TIMEOUT):
            while self.middleware.in_flight or self.middleware.budget.used:
                await asyncio.sleep(0)


@asynccontextmanager
async def served(
    handle: Callable[[str, Any], dict[str, Any]],
    *,
    pool: RequestPool,
    max_in_flight: int = 16,
    memory_budget: int = 32 * 1024 * 1024,
    thread: bool = False,
) -> AsyncIterator[Server]:
    loop = asyncio.get_running_loop()
    client_in, server_out = os.pipe()
    server_in, client_out = os.pipe()
    for fd in (client_in, client_out):
        os.set_blocking(fd, False)
    reader = PipeReader(loop, client_in, thread=thread)
    writer = PipeWriter(loop, client_out, on_broken=reader.detach)
    loop_answers: list[str] = []

    async def on_loop(method: str, params: Any) -> dict[str, Any]:
        loop_answers.append(method)
        return await anyio.to_thread.run_sync(handle, method, params)

    def route(method: str) -> FilesRoute | None:
        return None if method == "files/consent" else (pool.submit, handle)

    middleware = BrokerMiddleware(
        reader,
        writer,
        core=HandlerCore(on_loop, budget=lambda: memory_budget, router=route),
        roots=StaticRoots(),
        label="test",
        max_in_flight=max_in_flight,
    )
    from_client = os.fdopen(server_in, "rb")
    try:
        async with middleware.attach() as (session, _):
            yield Server(middleware, server_out, from_client, loop_answers, session)
    finally:
        reader.detach()
        writer.close()
        for fd in (client_in, client_out, server_out):
            with suppress(OSError):
                os.close(fd)
        from_client.close()


@pytest.fixture
def pool() -> Any:
    pool = RequestPool(4, thread_name_prefix="answers")
    yield pool
    pool.shutdown(wait=True, cancel_futures=True)


class Holding:
    """A handler that holds the request for *path* until :attr:`release` is set and answers others at once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.started = threading.Event()
        self.release = threading.Event()
        self.ran: list[str] = []  # the paths of every request it handled, in order

    def __call__(self, method: str, params: Any) -> dict[str, Any]:
        self.ran.append(params["path"])
        if params["path"] == self.path:
            self.started.set()
            self.release.wait(TIMEOUT)
        return {"path": params["path"]}

    async def wait_started(self) -> None:
        assert await anyio.to_thread.run_sync(self.started.wait, TIMEOUT)


def name_of_thread(method: str, params: Any) -> dict[str, Any]:
    if params.get("missing"):
        raise NotFound("no such file", path=params["missing"])
    return {"thread": threading.current_thread().name, "method": method}


async def test_a_request_is_answered_on_a_worker_thread_which_writes_the_answer(pool: RequestPool) -> None:
    async with served(name_of_thread, pool=pool) as server:
        for n in range(3):
            server.request(n, "files/read", path="data/f")
            answer = await server.answer()
            # Which worker: the last one idle, unless it is still finishing the request before.
            assert answer["result"]["thread"].startswith("answers_"), answer
            assert answer["result"]["method"] == "files/read"
            assert (answer["jsonrpc"], answer["id"]) == ("2.0", n)
        server.request(9, "files/stat", missing="data/nothing")
        error = (await server.answer())["error"]
        assert error["data"]["error"] == "NOT_FOUND"
        await server.settled()
        assert server.loop_answers == []


async def test_consent_is_answered_the_loop_s_way(pool: RequestPool) -> None:
    async with served(name_of_thread, pool=pool) as server:
        server.request(1, "files/consent", path="data")
        assert (await server.answer())["id"] == 1
        assert server.loop_answers == ["files/consent"]


async def test_a_cancelled_running_request_is_never_answered(pool: RequestPool) -> None:
    handle = Holding("slow")
    async with served(handle, pool=pool) as server:
        server.request(1, "files/read", path="slow")
        await handle.wait_started()
        assert server.middleware.in_flight == 1
        server.cancel(1)
        server.request(2, "files/stat", path="next")
        assert (await server.answer())["id"] == 2
        handle.release.set()
        await server.settled()  # the cancelled one has ended, without an answer
        server.request(3, "files/stat", path="last")
        assert (await server.answer())["id"] == 3


async def test_a_request_cancelled_before_a_thread_took_it_never_runs() -> None:
    one = RequestPool(1)
    handle = Holding("slow")
    try:
        async with served(handle, pool=one) as server:
            server.request(1, "files/read", path="slow")
            await handle.wait_started()
            server.request(2, "files/read", path="queued")
            server.cancel(2)
            server.request(3, "files/read", path="after")
            with anyio.fail_after(TIMEOUT):
                while server.middleware.in_flight < 2:  # 1 and 3 (2 is gone)
                    await asyncio.sleep(0)
            handle.release.set()
            assert {(await server.answer())["id"] for _ in range(2)} == {1, 3}
            await server.settled()
        assert handle.ran == ["slow", "after"]
    finally:
        one.shutdown(wait=True)


async def test_no_more_than_max_in_flight_run_at_once(pool: RequestPool) -> None:
    running, most = 0, 0
    lock = threading.Lock()
    release = threading.Event()
    first = threading.Event()

    def handle(method: str, params: Any) -> dict[str, Any]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        first.set()
        release.wait(TIMEOUT)
        with lock:
            running -= 1
        return {}

    async with served(handle, pool=pool, max_in_flight=2) as server:
        for n in range(6):
            server.request(n, "files/read", path=f"f{n}")
        assert await anyio.to_thread.run_sync(first.wait, TIMEOUT)
        release.set()
        assert sorted([(await server.answer())["id"] for _ in range(6)]) == list(range(6))
        await server.settled()
    assert most <= 2


async def test_requests_waiting_for_memory_go_on_as_worker_answers_finish(pool: RequestPool) -> None:
    release = threading.Event()
    running = threading.Event()

    def handle(method: str, params: Any) -> dict[str, Any]:
        running.set()
        release.wait(TIMEOUT)
        return {"path": params["path"]}

    # Room for one answer of these at a time (~19 kB each): the others wait for its memory.
    async with served(handle, pool=pool, memory_budget=20_000) as server:
        for n in range(4):
            server.request(n, "files/read", path=f"f{n}", length=4000)
        assert await anyio.to_thread.run_sync(running.wait, TIMEOUT)
        with anyio.fail_after(TIMEOUT):
            while server.middleware.budget.waiting < 3:
                await asyncio.sleep(0)
        release.set()
        # Nothing more comes from the server: each finished answer alone lets the next one go.
        assert sorted([(await server.answer())["id"] for _ in range(4)]) == list(range(4))
        await server.settled()


@pytest.mark.parametrize("thread", [False, True], ids=["worker", "reading-thread"])
async def test_an_answer_larger_than_one_pipe_write_arrives_whole(pool: RequestPool, thread: bool) -> None:
    big = "x" * 200_000

    def handle(method: str, params: Any) -> dict[str, Any]:
        return {"content": big if params["path"] == "big" else ""}

    async with served(handle, pool=pool, thread=thread) as server:
        server.request(1, "files/read", path="big")
        server.request(2, "files/read", path="small")
        answers = {a["id"]: a for a in [await server.answer(), await server.answer()]}
        assert answers[1]["result"]["content"] == big
        assert answers[2]["result"]["content"] == ""
        await server.settled()
        # Alone, it is answered by the reading thread; the loop writes it, and the next one follows.
        server.request(3, "files/read", path="big")
        assert (await server.answer())["result"]["content"] == big
        server.request(4, "files/read", path="small")
        assert (await server.answer())["id"] == 4
        await server.settled()
        assert server.middleware.in_flight == 0


@pytest.mark.parametrize("thread", [False, True], ids=["worker", "reading-thread"])
async def test_closing_mid_request_drops_its_answer_and_ends_the_threads(thread: bool) -> None:
    pool = RequestPool(2, thread_name_prefix="closing")
    started, release = threading.Event(), threading.Event()
    answered: list[str] = []

    def handle(method: str, params: Any) -> dict[str, Any]:
        started.set()
        release.wait(TIMEOUT)
        answered.append(params["path"])
        return {}

    async with served(handle, pool=pool, thread=thread) as server:
        server.request(1, "files/read", path="slow")
        assert await anyio.to_thread.run_sync(started.wait, TIMEOUT)
        middleware = server.middleware
    assert middleware.in_flight == 0  # closed: nothing of it is waited for any more
    release.set()
    pool.shutdown(wait=True)
    with anyio.fail_after(TIMEOUT):  # the reading thread ends once its answer is made (and dropped)
        while [t for t in threading.enumerate() if t.name.startswith(("closing_", "fsbroker-pipe-reader"))]:
            await asyncio.sleep(0.001)
    assert answered == ["slow"]


async def test_a_server_that_stops_reading_ends_the_connection(pool: RequestPool) -> None:
    async with served(name_of_thread, pool=pool) as server:
        server.from_client.close()  # the server's stdin is gone: the next write breaks
        server.request(1, "files/read", path="data/f")
        with anyio.fail_after(TIMEOUT):
            await server.middleware.transport_closed.wait()


async def test_write_now_never_cuts_into_a_message_on_its_way_and_drops_after_close() -> None:
    loop = asyncio.get_running_loop()
    server_in, client_out = os.pipe()
    os.set_blocking(client_out, False)
    writer = PipeWriter(loop, client_out, on_broken=lambda: None)
    try:
        big = b"y" * (4 * 1024 * 1024)  # more than the pipe holds: its write waits for the reader
        sending = asyncio.ensure_future(writer.send_bytes(big))
        await asyncio.sleep(0)
        assert not sending.done()
        assert writer.write_now(b'{"small":1}') is False  # a message is on its way
        received = bytearray()
        with anyio.fail_after(TIMEOUT):
            while len(received) < len(big) + 1:
                received += await anyio.to_thread.run_sync(os.read, server_in, 1 << 20)
            await sending
        assert writer.write_now(b'{"small":2}') is True
        assert writer.write_now(b"z" * 8192) is False  # more than one atomic pipe write
        with anyio.fail_after(TIMEOUT):
            while not received.endswith(b'\n{"small":2}\n'):
                received += await anyio.to_thread.run_sync(os.read, server_in, 1 << 20)
        assert bytes(received) == big + b'\n{"small":2}\n'
        writer.close()
        assert writer.write_now(b'{"small":3}') is True  # dropped, as send_bytes drops it
    finally:
        os.close(server_in)
        os.close(client_out)
