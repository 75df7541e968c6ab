"""A server floods the broker: memory stays bounded by the connection's budget, and every request is answered.

With the default limits, a flood of small requests is refused (RATE_LIMITED with
``retryAfterMs``) while the same requests sent one at a time, as fast as the
broker answers them, never are.

Before the memory budget, finished answers queued without limit behind the
single writer: hundreds of large reads sent at once with thousands of small
requests grew the brokering process by over 1 GiB. Now a request waits until
its answer fits in the budget, and past a queue as large as the budget it is
answered RATE_LIMITED at once. The bound asserted here is generous (the
process also keeps freed memory in its allocator's arenas); the benchmark
reports the figure.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_fsbroker.core.limits import Limits
from jupyter_fsbroker.protocol import open_connection
from tests.reliability.harness import UNLIMITED
from tests.support.brokers import make_broker

FLOOD = str(Path(__file__).resolve().parent / "servers" / "flood.py")
MiB = 1024 * 1024
BUDGET = 16 * MiB


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def memory_kib() -> tuple[int, int]:
    """This process's resident memory now and at its peak (VmRSS, VmHWM), in KiB."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found["VmRSS"], found["VmHWM"]


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


@pytest.mark.anyio
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's peak-RSS reset")
async def test_a_flood_of_large_reads_stays_within_the_memory_budget(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "big.bin").write_bytes(os.urandom(2 * MiB))
    (data / "small.txt").write_text("small\n")
    flood = {
        "big": 300,
        "small": 3000,
        "big_path": "data/big.bin",
        "small_path": "data/small.txt",
        "length": 10**12,  # clamped to 2 MiB: the whole file, every time
    }
    # Rates high enough never to refuse: the budget alone bounds the flood.
    with make_broker(tmp_path, limits=Limits(memory_budget=BUDGET, **UNLIMITED)) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        async with open_connection(broker, "flood", command=sys.executable, args=[FLOOD]) as conn:
            assert reset_peak()
            before, _ = memory_kib()
            result = await conn.call_tool("flood", flood, timeout=600)
            _, peak = memory_kib()
            # Still serving, and what was held is given back.
            assert conn.state == "open"
            assert conn.connection.closed is False
    report = json.loads(result["content"][0]["text"])
    assert report["requests"] == 3300
    assert report["answered"] == 3300, report
    assert report["twice"] == 0, report
    # Answers, or refusals that say when to retry: nothing else.
    assert set(report["outcomes"]) <= {"result", "-32107"}, report
    assert report["outcomes"].get("result", 0) >= 300, report
    assert all(retry > 0 for retry in report["retry_after_ms"])
    growth_mib = (peak - before) / 1024
    print(
        f"\nflood: {report['requests']} requests, budget {BUDGET // MiB} MiB, outcomes {report['outcomes']}; "
        f"peak RSS growth {growth_mib:.0f} MiB"
    )
    assert growth_mib < 4 * BUDGET / MiB + 128, f"the process grew by {growth_mib:.0f} MiB"


async def run_tool(
    broker_limits: Limits | None, tmp_path: Path, tool: str, args: dict[str, object]
) -> dict[str, Any]:
    """Call *tool* of the flood server over stdio, with *broker_limits* (``None``: the defaults)."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "small.txt").write_text("x" * 96)
    options = {} if broker_limits is None else {"limits": broker_limits}
    with make_broker(tmp_path, **options) as broker:
        broker.add_root(data, name="data")
        broker.allow("data", ops=("read",))
        async with open_connection(broker, "flood", command=sys.executable, args=[FLOOD]) as conn:
            result = await conn.call_tool(tool, args, timeout=600)
    report: dict[str, Any] = json.loads(result["content"][0]["text"])
    return report


@pytest.mark.anyio
async def test_a_sequential_server_at_full_speed_is_never_rate_limited(tmp_path: Path) -> None:
    count = max(10_000, 3 * Limits().ops_burst)  # well past the burst: the rate decides
    for method, params in [
        ("files/read", {"path": "data/small.txt"}),
        ("files/stat", {"path": "data/missing.txt"}),  # NOT_FOUND: answered fastest
    ]:
        report = await run_tool(
            None, tmp_path, "sequence", {"count": count, "method": method, "params": params}
        )
        rate = report["requests"] / report["seconds"]
        print(f"\n{count} sequential {method} over stdio: {rate:.0f} per second, {report['outcomes']}")
        assert "-32107" not in report["outcomes"], (method, rate, report)
        assert sum(report["outcomes"].values()) == count


@pytest.mark.anyio
async def test_a_flood_of_small_requests_is_refused_with_a_retry_time_by_default(tmp_path: Path) -> None:
    flood = {"big": 0, "small": 20_000, "big_path": "", "small_path": "data/small.txt", "length": 1}
    report = await run_tool(None, tmp_path, "flood", flood)
    assert report["answered"] == report["requests"] == 20_000 and report["twice"] == 0, report
    assert set(report["outcomes"]) == {"result", "-32107"}, report
    assert report["retry_after_ms"] and all(retry > 0 for retry in report["retry_after_ms"])
    print(f"\nflood of 20000 files/stat with the default limits: {report['outcomes']}")
