from __future__ import annotations

import threading

import pytest

from jupyter_fsbroker.core.errors import ConfigError, RateLimited, to_jsonrpc_error
from jupyter_fsbroker.core.limits import MAX_CHUNK_BYTES, Limits, MiB, RateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_defaults() -> None:
    limits = Limits()
    assert limits.max_chunk_bytes == 2 * MiB == MAX_CHUNK_BYTES
    assert limits.default_read_bytes == MiB
    assert limits.max_list_entries == 10_000
    assert limits.max_watches == 64
    assert limits.max_uploads == 16
    assert limits.upload_idle_timeout == 300.0
    assert limits.lock_wait == 2.0
    assert limits.consent_timeout == 120.0
    assert limits.max_in_flight == 16


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"max_chunk_bytes": 2 * MiB + 1}, "2 MiB"),
        ({"max_chunk_bytes": 1024}, "default_read_bytes"),
        ({"default_read_bytes": 3 * MiB}, "default_read_bytes"),
        ({"max_watches": 0}, "positive"),
        ({"max_in_flight": 0}, "positive"),
        ({"max_in_flight": 2.5}, "integer"),
        ({"lock_wait": -1.0}, "positive"),
        ({"ops_per_second": float("inf")}, "positive"),
        ({"bytes_per_second": float("nan")}, "positive"),
        ({"max_uploads": 1.5}, "integer"),
        ({"max_uploads": True}, "integer"),
        ({"consent_timeout": "10"}, "number"),
    ],
)
def test_validation(changes: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Limits(**changes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=needle):
        Limits().replace(**changes)


def test_replace() -> None:
    limits = Limits().replace(max_chunk_bytes=1024, default_read_bytes=512, lock_wait=1)
    assert (limits.max_chunk_bytes, limits.default_read_bytes, limits.lock_wait) == (1024, 512, 1)
    assert Limits().max_chunk_bytes == 2 * MiB
    with pytest.raises(ConfigError, match="unknown limit"):
        Limits().replace(max_chunks=3)


def test_ops_bucket() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Limits(ops_per_second=10, ops_burst=5), clock=clock)
    for _ in range(5):
        limiter.take_op()
    with pytest.raises(RateLimited) as info:
        limiter.take_op(path="data/x")
    err = info.value
    assert err.reason == "ops_rate"
    assert err.path == "data/x"
    assert err.data["retryAfterMs"] == 100
    wire = to_jsonrpc_error(err)
    assert wire["code"] == -32107
    assert wire["data"]["error"] == "RATE_LIMITED"
    assert wire["data"]["retryAfterMs"] == 100
    clock.advance(0.05)
    with pytest.raises(RateLimited) as info:
        limiter.take_op()
    assert info.value.data["retryAfterMs"] == 50
    clock.advance(0.05)
    limiter.take_op()
    with pytest.raises(RateLimited):
        limiter.take_op()
    # Refill caps at the burst.
    clock.advance(100)
    for _ in range(5):
        limiter.take_op()
    with pytest.raises(RateLimited):
        limiter.take_op()


def test_ops_float_rounding() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Limits(ops_per_second=2000, ops_burst=1), clock=clock)
    limiter.take_op()
    for _ in range(1000):
        clock.advance(0.0005)
        limiter.take_op()


def test_bytes_bucket() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Limits(bytes_per_second=1000, bytes_burst=2000), clock=clock)
    limiter.take_bytes(1500)
    limiter.take_bytes(0)
    with pytest.raises(RateLimited) as info:
        limiter.take_bytes(600, path="data/y")
    assert info.value.reason == "bytes_rate"
    assert info.value.path == "data/y"
    assert info.value.data["retryAfterMs"] == 100
    clock.advance(0.1)
    limiter.take_bytes(600)
    with pytest.raises(ValueError):
        limiter.take_bytes(-1)


def test_bytes_larger_than_burst_pass_when_full() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Limits(bytes_per_second=1000, bytes_burst=1000), clock=clock)
    limiter.take_bytes(5000)  # full bucket: passes, leaving a debt of 4000
    with pytest.raises(RateLimited) as info:
        limiter.take_bytes(5000)
    # The bucket must refill from -4000 to full: 5 s.
    assert info.value.data["retryAfterMs"] == 5000
    clock.advance(4.999)
    with pytest.raises(RateLimited):
        limiter.take_bytes(5000)
    clock.advance(0.001)
    limiter.take_bytes(5000)
    # Small requests also wait for the debt.
    with pytest.raises(RateLimited) as info:
        limiter.take_bytes(1)
    assert info.value.data["retryAfterMs"] == 4001


def test_ops_and_bytes_are_independent() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Limits(ops_burst=1, bytes_burst=10, bytes_per_second=1), clock=clock)
    limiter.take_op()
    limiter.take_bytes(10)
    with pytest.raises(RateLimited, match="operations"):
        limiter.take_op()
    with pytest.raises(RateLimited, match="bytes"):
        limiter.take_bytes(1)
    assert limiter.limits.ops_burst == 1


def test_thread_safe_counting() -> None:
    clock = FakeClock()
    limiter = RateLimiter(Limits(ops_per_second=1, ops_burst=1000), clock=clock)
    ok: list[int] = []
    denied: list[int] = []

    def work() -> None:
        for _ in range(500):
            try:
                limiter.take_op()
            except RateLimited:
                denied.append(1)
            else:
                ok.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 1000
    assert len(denied) == 1000
