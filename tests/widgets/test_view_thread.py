"""The views' thread: posted calls run there in order; bursts coalesce; clocks tick; close joins it."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.limits import MiB
from jupyter_fsbroker.widgets.progress import TransferProgress
from jupyter_fsbroker.widgets.view_thread import VIEWS_THREAD, ViewThread

from .conftest import ALL_OPS, WAIT

_names = itertools.count()


def _unique_name() -> str:
    return f"{VIEWS_THREAD}-under-test-{next(_names)}"


def _alive(name: str) -> bool:
    return any(t.name == name for t in threading.enumerate())


def test_posted_calls_run_in_order_on_the_views_thread() -> None:
    ran: list[tuple[int, str]] = []
    done = threading.Event()
    with ViewThread() as views:
        for i in range(5):
            assert views.post(lambda i=i: ran.append((i, threading.current_thread().name)))
        views.post(done.set)
        assert done.wait(WAIT)
    assert ran == [(i, VIEWS_THREAD) for i in range(5)]


def test_the_thread_starts_with_the_first_call_and_close_joins_it() -> None:
    name = _unique_name()
    views = ViewThread(name=name)
    assert not _alive(name)
    assert views.call(lambda: threading.current_thread().name) == name
    views.close()
    assert not _alive(name)
    assert views.post(print) is False  # closed: nothing runs any more
    views.close()  # idempotent


def test_a_failing_call_is_logged_and_the_next_ones_run(caplog: pytest.LogCaptureFixture) -> None:
    with ViewThread() as views:
        views.post(lambda: 1 / 0)
        assert views.call(lambda: "still running") == "still running"
    assert "a view update failed" in caplog.text


def test_call_returns_the_result_or_raises_the_error_and_runs_inline_on_the_thread() -> None:
    with ViewThread() as views:
        assert views.call(lambda x: x * 2, 21) == 42
        with pytest.raises(ZeroDivisionError):
            views.call(lambda: 1 / 0)
        # From the thread itself: at once, not queued behind the caller (which would never end).
        assert views.call(lambda: views.call(lambda: "inline")) == "inline"


def test_a_burst_of_coalesced_requests_runs_once() -> None:
    runs: list[float] = []
    with ViewThread() as views:
        gate = threading.Event()
        views.post(gate.wait, WAIT)  # the burst arrives while the thread is busy
        for _ in range(50):
            views.coalesce("dashboard", lambda: runs.append(time.monotonic()), 0.05)
        gate.set()
        views.settle()
        deadline = time.monotonic() + WAIT
        while not runs and time.monotonic() < deadline:
            views.settle()
        assert len(runs) == 1
        # Asked again after the run: a second run, at least the interval after the first.
        views.coalesce("dashboard", lambda: runs.append(time.monotonic()), 0.05)
        second = threading.Event()
        views.coalesce("other", second.set, 0.0)
        assert second.wait(WAIT)
        deadline = time.monotonic() + WAIT
        while len(runs) < 2 and time.monotonic() < deadline:
            views.settle()
    assert len(runs) == 2 and runs[1] - runs[0] >= 0.05


def test_a_clock_ticks_until_it_returns_none() -> None:
    ticks: list[str] = []
    over = threading.Event()

    def tick() -> float | None:
        ticks.append(threading.current_thread().name)
        if len(ticks) == 3:
            over.set()
            return None
        return 0.01

    with ViewThread() as views:
        views.clock(tick)
        assert over.wait(WAIT)
        views.settle()
    assert ticks == [VIEWS_THREAD] * 3


def test_a_read_in_one_chunk_posts_nothing_and_a_chunked_one_posts(broker: Broker, data: Path) -> None:
    (data / "one.bin").write_bytes(b"\x01" * MiB)
    (data / "big.bin").write_bytes(b"\x01" * (2 * MiB + 1))
    broker.allow("data", ops=ALL_OPS)
    conn = broker.connect("analysis")
    name = _unique_name()
    with ViewThread(name=name) as views:
        progress = TransferProgress(broker, min_interval=0.0, views=views)
        conn.handle("files/read", {"path": "data/x.csv"})
        conn.handle("files/read", {"path": "data/one.bin", "encoding": "base64", "length": 2 * MiB})
        assert not _alive(name), "a file read in one request started the views' thread"
        conn.handle("files/read", {"path": "data/big.bin", "encoding": "base64", "length": MiB})
        assert _alive(name)
        views.settle()
        (row,) = progress.transfers()
        assert row["done"] == MiB and not row["finished"]
        progress.close()
        views.settle()
        assert progress.transfers() == []
