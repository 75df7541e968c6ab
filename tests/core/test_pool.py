"""The broker's worker threads: the last idle thread takes the next call, bounded, shut down cleanly."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.pool import RequestPool

TIMEOUT = 5.0


def test_sequential_calls_go_to_the_thread_idle_the_shortest_time() -> None:
    pool = RequestPool(4, thread_name_prefix="t")
    try:
        # Two threads: one held busy while the second runs a call and goes idle.
        release = threading.Event()
        busy = pool.submit(lambda: (release.wait(TIMEOUT), threading.get_ident())[1])
        second = pool.submit(threading.get_ident).result(TIMEOUT)
        assert pool.wait_idle(1, TIMEOUT)
        release.set()
        first = busy.result(TIMEOUT)
        assert pool.wait_idle(2, TIMEOUT)
        # The first thread went idle last: each later call, once the one before is done, goes to it.
        ran = set()
        for _ in range(20):
            ran.add(pool.submit(threading.get_ident).result(TIMEOUT))
            assert pool.wait_idle(2, TIMEOUT)
        assert first != second
        assert ran == {first}
    finally:
        pool.shutdown()


def test_results_errors_and_names() -> None:
    pool = RequestPool(2, thread_name_prefix="fsbroker-io")
    try:
        assert pool.submit(lambda a, b=0: a + b, 1, b=2).result(TIMEOUT) == 3
        with pytest.raises(KeyError, match="missing"):
            pool.submit({}.__getitem__, "missing").result(TIMEOUT)
        assert pool.submit(lambda: threading.current_thread().name).result(TIMEOUT) == "fsbroker-io_0"
    finally:
        pool.shutdown()


def test_at_most_max_workers_threads_and_the_rest_wait_their_turn_in_order() -> None:
    pool = RequestPool(2, thread_name_prefix="bounded")
    release = threading.Event()
    started = threading.Barrier(3)
    order: list[int] = []
    try:
        held = [pool.submit(lambda: (started.wait(TIMEOUT), release.wait(TIMEOUT))) for _ in range(2)]
        started.wait(TIMEOUT)  # both threads are busy
        queued = [pool.submit(order.append, n) for n in range(5)]
        assert sum(t.name.startswith("bounded_") for t in threading.enumerate()) == 2
        assert not any(f.done() for f in queued)
        release.set()
        for future in (*held, *queued):
            future.result(TIMEOUT)
        assert sorted(order) == list(range(5))
    finally:
        release.set()
        pool.shutdown()


def test_shutdown_cancels_queued_calls_lets_running_ones_finish_and_leaves_no_thread() -> None:
    before = set(threading.enumerate())
    pool = RequestPool(1)
    started, release = threading.Event(), threading.Event()

    def work() -> str:
        started.set()
        release.wait(TIMEOUT)
        return "done"

    running = pool.submit(work)
    started.wait(TIMEOUT)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    with pytest.raises(CancelledError):
        queued.result(TIMEOUT)
    with pytest.raises(RuntimeError, match="shutdown"):
        pool.submit(lambda: None)
    release.set()
    pool.shutdown(wait=True)
    assert running.result(0) == "done"
    assert set(threading.enumerate()) <= before


def test_idle_threads_end_at_shutdown() -> None:
    before = set(threading.enumerate())
    pool = RequestPool(3)
    barrier = threading.Barrier(3)
    for future in [pool.submit(barrier.wait, TIMEOUT) for _ in range(3)]:
        future.result(TIMEOUT)
    assert len(set(threading.enumerate()) - before) == 3
    pool.shutdown(wait=True)
    assert set(threading.enumerate()) <= before


def test_the_broker_runs_requests_on_its_pool_and_closes_it(broker: Broker) -> None:
    pool = broker.executor()
    assert isinstance(pool, RequestPool)
    assert broker.executor() is pool
    assert pool.submit(lambda: 42).result(TIMEOUT) == 42
    broker.close()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
