"""The default rates never bind a client that works one request at a time, and still refuse a flood.

A server that waits for each answer before it sends the next request cannot be
faster than the broker answering it. The core driven in a tight loop, with no
transport at all, is the fastest such client there is: with the default limits
it is never refused. A client above the default rates is (the limiter on a
clock of the test's, since nothing on this machine can send that fast; a real
flood through a transport is refused by the memory budget first:
``tests/reliability/test_flood.py``).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from jupyter_fsbroker.core.errors import FilesError, RateLimited
from jupyter_fsbroker.core.limits import Limits, MiB, RateLimiter
from tests.support.brokers import ALL_OPS, make_broker

#: The shortest a loop runs: long enough that its rate, not the burst, decides.
AT_LEAST_SECONDS = 2.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_sequential_client_at_full_speed_is_never_rate_limited(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "folder").mkdir(parents=True)
    (data / "small.txt").write_text("x" * 96)
    for i in range(5):
        (data / "folder" / f"{i}.csv").write_text("1")
    requests = [
        ("files/read", {"path": "data/small.txt"}),
        ("files/stat", {"path": "data/small.txt"}),
        ("files/stat", {"path": "data/missing.txt"}),  # NOT_FOUND: the cheapest ordinary request
        ("files/list", {"path": "data/folder"}),
        ("files/read", {"path": "data/small.txt", "offset": -1}),  # refused at once: cheaper still
    ]
    with make_broker(tmp_path) as broker:  # the default limits
        broker.add_root(data, name="data")
        broker.allow("data", ops=ALL_OPS)
        conn = broker.connect("sequential")
        at_least = 3 * broker.config.limits.ops_burst // 2  # past the burst: the rate decides
        done, start = 0, time.perf_counter()
        while done < at_least or time.perf_counter() - start < AT_LEAST_SECONDS:
            method, params = requests[done % len(requests)]
            try:
                conn.handle(method, params)
            except RateLimited as exc:
                rate = done / (time.perf_counter() - start)
                raise AssertionError(
                    f"refused after {done} requests at {rate:.0f} per second: {exc}"
                ) from None
            except FilesError:
                pass  # the missing file and the bad offset
            done += 1
    print(f"\n{done} sequential requests, {done / (time.perf_counter() - start):.0f} per second")


def test_sequential_reads_at_full_speed_are_never_rate_limited(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    size = 64 * MiB
    (data / "big.bin").write_bytes(os.urandom(size))
    with make_broker(tmp_path) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        conn = broker.connect("sequential")
        at_least = 3 * broker.config.limits.bytes_burst // 2
        moved, start = 0, time.perf_counter()
        while moved < at_least or time.perf_counter() - start < AT_LEAST_SECONDS:
            params = {"path": "data/big.bin", "encoding": "base64", "offset": moved % size, "length": 2 * MiB}
            try:
                # Kept until the next answer is made, as a transport writing it keeps it: a heap that
                # gives each freed chunk back to the system would fault the next one in again.
                answer = conn.handle("files/read", params)
            except RateLimited as exc:
                rate = moved / MiB / (time.perf_counter() - start)
                raise AssertionError(
                    f"refused after {moved / MiB:.0f} MiB at {rate:.0f} MiB/s: {exc}"
                ) from None
            moved += answer["bytesRead"]
    print(
        f"\n{moved / MiB:.0f} MiB read sequentially, {moved / MiB / (time.perf_counter() - start):.0f} MiB/s"
    )


@pytest.mark.parametrize("kind", ["ops", "bytes"])
def test_a_flood_above_the_default_rates_is_refused_with_a_retry_time(kind: str) -> None:
    limits = Limits()
    clock = FakeClock()
    limiter = RateLimiter(limits, clock=clock)
    rate = limits.ops_per_second if kind == "ops" else limits.bytes_per_second
    burst = limits.ops_burst if kind == "ops" else limits.bytes_burst
    unit = 1 if kind == "ops" else 2 * MiB  # one request, or one largest chunk
    # Requests at twice the rate or more, for long enough to empty the burst twice over.
    step = 0.001
    per_step = math.ceil(2 * rate * step / unit)
    steps = math.ceil(max(1.0, 2 * burst / rate) / step)
    passed, refused, retry_ms = 0, 0, set()
    for _ in range(steps):
        for _ in range(per_step):
            try:
                if kind == "ops":
                    limiter.take_op(path="data/x")
                else:
                    limiter.take_bytes(unit, path="data/x")
                passed += 1
            except RateLimited as exc:
                assert exc.reason == f"{kind}_rate" and exc.path == "data/x"
                refused += 1
                retry_ms.add(exc.data["retryAfterMs"])
        clock.now += step
    # What passed is the burst and the rate over the time (the last step's refill goes unused),
    # to a request or two; the rest was refused.
    allowed = burst + rate * (steps - 1) * step
    assert abs(passed * unit - allowed) <= 2 * unit, (passed * unit, allowed)
    assert refused == steps * per_step - passed > 0
    assert retry_ms and all(0 < ms <= 1000 for ms in retry_ms)
