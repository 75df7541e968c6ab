"""A blocking call on a worker thread, awaited: results, errors, cancellation, the executor's shutdown."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from jupyter_fsbroker.core.hop import off_loop

TIMEOUT = 5.0


def test_the_result_and_the_error_come_back_and_the_call_ran_off_the_loop() -> None:
    async def main() -> tuple[int, int]:
        with ThreadPoolExecutor(1) as executor:
            ident = await off_loop(executor, threading.get_ident)
            with pytest.raises(KeyError, match="missing"):
                await off_loop(executor, {}.__getitem__, "missing")
        return ident, threading.get_ident()

    worker, loop_thread = asyncio.run(main())
    assert worker != loop_thread


def test_a_call_cancelled_before_it_started_never_runs() -> None:
    ran: list[str] = []
    release = threading.Event()

    async def main() -> None:
        with ThreadPoolExecutor(1) as executor:
            busy = asyncio.ensure_future(off_loop(executor, release.wait, TIMEOUT))
            queued = asyncio.ensure_future(off_loop(executor, ran.append, "queued"))
            await asyncio.sleep(0)  # both submitted; the one thread is busy
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            release.set()
            assert await busy is True
            await off_loop(executor, ran.append, "after")

    asyncio.run(main())
    assert ran == ["after"]


def test_a_started_call_runs_to_its_end_and_its_result_is_dropped() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def work() -> str:
        started.set()
        release.wait(TIMEOUT)
        finished.set()
        return "late"

    async def main() -> None:
        with ThreadPoolExecutor(1) as executor:
            call = asyncio.ensure_future(off_loop(executor, work))
            await asyncio.to_thread(started.wait, TIMEOUT)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            release.set()
        assert finished.is_set()

    asyncio.run(main())


def test_the_executor_shutting_down_cancels_a_call_that_never_ran() -> None:
    release = threading.Event()

    async def main() -> None:
        executor = ThreadPoolExecutor(1)
        busy = asyncio.ensure_future(off_loop(executor, release.wait, TIMEOUT))
        queued = asyncio.ensure_future(off_loop(executor, lambda: "never"))
        await asyncio.sleep(0)
        executor.shutdown(wait=False, cancel_futures=True)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(queued, TIMEOUT)
        release.set()
        assert await busy is True
        executor.shutdown(wait=True)

    asyncio.run(main())
