"""Load: two brokering processes, each serving a real server over stdio, increment one counter 1,000 times.

Each increment is a locked read-modify-write: a ``keepLocked`` read (repeated
after a pause of a few milliseconds while the other process holds the lock),
a write, a ``files/unlock``. The two brokers share only the folder and the
lock directory, as two kernels on one machine do; the count must come out
exact. Both sweep the folder for leftovers before every write (``stale_age``
0): neither ever takes the other's live temporary file for one.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability.brokerproc import BrokerProcess

INCREMENTS = 1000
#: Seconds the increments of one process may take on a loaded two-core machine before the test
#: gives up (a hang, not a speed check: the duration is printed).
PATIENCE = 600.0


@pytest.mark.slow
@pytest.mark.timeout(PATIENCE + 120)
def test_two_brokering_processes_increment_one_counter_exactly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "counter.txt").write_text("0\n")
    brokers = [
        BrokerProcess(tmp_path, {"data": data}, allow=["data:read,write"], label=f"broker{i}", stale_age=0)
        for i in range(2)
    ]
    try:
        for i, broker in enumerate(brokers):
            broker.connect(f"counter{i}")
        started = time.monotonic()
        calls = [
            broker.send(
                "call",
                name=f"counter{i}",
                tool="increment",
                args={"path": "data/counter.txt", "times": INCREMENTS},
                timeout=PATIENCE,
            )
            for i, broker in enumerate(brokers)
        ]
        results = [broker.wait(call, PATIENCE + 10) for broker, call in zip(brokers, calls, strict=True)]
        elapsed = time.monotonic() - started
        stats = [broker.stats() for broker in brokers]
    finally:
        for broker in brokers:
            broker.exit()
    assert (data / "counter.txt").read_text() == f"{2 * INCREMENTS}\n"
    assert [r["done"] for r in results] == [INCREMENTS, INCREMENTS]
    for i, (result, stat) in enumerate(zip(results, stats, strict=True)):
        totals = stat["audit"][f"counter{i}"]
        assert totals["allowed"] + totals["denied"] == result["requests"]  # one record per request
        assert stat["locks"] == []
    conflicts = sum(r["conflicts"] for r in results)
    print(
        f"\n{2 * INCREMENTS} locked increments by two brokering processes in {elapsed:.1f} s "
        f"({conflicts} conflicts met and retried)"
    )
    assert [p.name for p in data.iterdir()] == ["counter.txt"]  # no temporary file left
    assert list((tmp_path / "locks").iterdir()) == []  # every lock file went with its lock
