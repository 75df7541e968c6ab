"""``files/*`` answered by the stdio transport's reading thread itself, over real pipes.

A lone request is answered on the thread that read it, the loop not involved;
anything else keeps its way and its order: messages for the session, requests
while another is on its way, cancellation, end of file (closing mid-request:
``test_worker_answers``). A request that lasts (stuck in the file system)
holds up neither the loop nor another connection, nor for long its own: the
second reading thread reads on, so its cancel and later requests get through.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from jupyter_fsbroker.core.pool import RequestPool
from jupyter_fsbroker.protocol.transports.reading import RELIEF_TICK, ReadingThreads
from tests.protocol.test_worker_answers import TIMEOUT, Holding, name_of_thread, served

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


async def test_while_a_lone_request_lasts_the_connection_is_read_on_and_its_cancel_reaches_it(
    pool: RequestPool,
) -> None:
    started, release = threading.Event(), threading.Event()
    ran: list[tuple[str, str]] = []

    def handle(method: str, params: Any) -> dict[str, Any]:
        ran.append((params["path"], threading.current_thread().name))
        if params["path"] == "slow":
            started.set()
            release.wait(TIMEOUT)
        return {"path": params["path"], "thread": threading.current_thread().name}

    async with served(handle, pool=pool, thread=True) as server:
        server.request(1, "files/read", path="slow")  # alone: the reading thread answers it
        assert await anyio.to_thread.run_sync(started.wait, TIMEOUT)
        # It lasts: the other reading thread reads on, and a request behind it takes a worker's way.
        server.request(2, "files/read", path="two")
        second = await server.answer()
        assert second["id"] == 2 and second["result"]["thread"].startswith("answers"), second
        server.cancel(1)
        server.request(3, "files/stat", path="three")  # read after the cancel: 1 is cancelled by then
        assert (await server.answer())["id"] == 3
        release.set()
        await server.settled()
        # The thread that answered reads again; 1 was never answered.
        server.request(4, "files/read", path="four")
        fourth = await server.answer()
        assert fourth["id"] == 4 and fourth["result"]["thread"] == READER, fourth
        await server.settled()
        assert server.middleware.in_flight == 0
    assert ran[0] == ("slow", READER)
    await no_reading_thread()


async def test_a_cancel_reaches_a_request_on_a_worker_while_the_loop_holds_another(pool: RequestPool) -> None:
    started, release, holding = threading.Event(), threading.Event(), threading.Event()

    def handle(method: str, params: Any) -> dict[str, Any]:
        if params["path"] == "hold":
            holding.set()
            release.wait(TIMEOUT)
        if params["path"] == "slow":
            started.set()
            release.wait(TIMEOUT)
        return {"path": params["path"], "thread": threading.current_thread().name}

    async with served(handle, pool=pool, thread=True) as server:
        # With another request on its way (a consent, on the loop), a request goes a worker's way.
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
    handle = Holding("stuck")
    async with served(handle, pool=pool, thread=True) as one, served(handle, pool=pool, thread=True) as two:
        one.request(1, "files/read", path="stuck")
        await handle.wait_started()
        for n in range(3):
            two.request(n, "files/read", path="free")
            assert (await two.answer())["id"] == n
        await asyncio.sleep(0)  # the loop turns meanwhile
        handle.release.set()
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


# -- the two reading threads themselves, on a bare pipe ------------------------------------------


class Pipe:
    """A pipe read by :class:`ReadingThreads`; each step reads what came and may answer it (hold it)."""

    def __init__(self, hold: set[bytes]) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.hold = hold
        self.release = threading.Event()
        self.holding = threading.Event()
        self.seen: list[tuple[bytes, int]] = []
        self.arrived = threading.Condition()
        self.threads = ReadingThreads(
            self.read_fd, step=self.step, pause_at=(64, 1 << 20), name="test-reader"
        )

    def step(self) -> bool:
        try:
            data = os.read(self.read_fd, 4096)
        except BlockingIOError:
            return True
        if not data:
            return False
        with self.arrived:
            self.seen.append((data, threading.get_native_id()))
            self.arrived.notify_all()
        if data in self.hold:
            with self.threads.answering():
                self.holding.set()
                self.release.wait(TIMEOUT)
        return True

    def wait_seen(self, count: int) -> list[tuple[bytes, int]]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.seen) >= count, TIMEOUT), self.seen
            return list(self.seen)

    def close(self) -> None:
        self.release.set()
        self.threads.stop()
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def switches(native_id: int) -> int:
    """The voluntary context switches of one of this process's threads so far (its wake-ups)."""
    with open(f"/proc/self/task/{native_id}/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_an_answer_that_lasts_has_the_other_thread_read_on_and_then_they_swap() -> None:
    pipe = Pipe(hold={b"slow"})
    try:
        pipe.threads.start()
        os.write(pipe.write_fd, b"slow")
        assert pipe.holding.wait(TIMEOUT)
        os.write(pipe.write_fd, b"next")
        (first, answering), (second, reading) = pipe.wait_seen(2)
        assert (first, second) == (b"slow", b"next") and reading != answering
        pipe.release.set()
        os.write(pipe.write_fd, b"third")
        assert pipe.wait_seen(3)[2] == (b"third", reading)  # the role stays where it went
        os.close(pipe.write_fd)  # end of file ends both threads
        for thread in [t for t in threading.enumerate() if t.name == "test-reader"]:
            thread.join(TIMEOUT)
        assert not pipe.threads.alive
    finally:
        pipe.close()


def settles(measure: Callable[[], float], what: str) -> None:
    """Wait until *measure* stays the same for a while (fail if it still changes after TIMEOUT)."""
    deadline = time.monotonic() + TIMEOUT
    last, still_since = measure(), time.monotonic()
    while time.monotonic() - still_since < 20 * RELIEF_TICK:
        assert time.monotonic() < deadline, what
        time.sleep(RELIEF_TICK)
        now = measure()
        if now != last:
            last, still_since = now, time.monotonic()


def test_after_a_run_of_quick_answers_both_threads_go_quiet() -> None:
    pipe = Pipe(hold={b"quick"})
    pipe.release.set()  # answers end at once
    try:
        pipe.threads.start()
        for n in range(1, 21):  # one after another, as a sequential server sends: the holder spins
            os.write(pipe.write_fd, b"quick")
            pipe.wait_seen(n)
        holder = next(t for t in threading.enumerate() if t.native_id == pipe.seen[0][1])
        looking = next(t for t in threading.enumerate() if t.name == "test-reader" and t is not holder)
        assert holder.ident is not None and looking.native_id is not None
        native_id = looking.native_id
        clock = time.pthread_getcpuclockid(holder.ident)
        # The holder stops spinning (its CPU time stands still) and the looking thread checks a
        # few times more, then sleeps until the next answer (no more wake-ups).
        settles(lambda: time.clock_gettime(clock), "the reading thread keeps using CPU")
        settles(lambda: switches(native_id), "the looking thread keeps waking up")
    finally:
        pipe.close()
    for thread in [t for t in threading.enumerate() if t.name == "test-reader"]:
        thread.join(TIMEOUT)
