"""Soak: several servers at once, mixed operations for a while; the brokering process ends as it began.

One brokering process serves three servers over stdio and one over
Streamable HTTP. Each runs the ``soak`` tool of ``servers/app.py`` in a folder
of its own (reads, whole and staged writes, lists, stats, creates, deletes,
renames, watches, consent for a pre-approved folder, every answer checked
against what it wrote) and takes turns with the others on a shared counter
under ``keepLocked`` locks.

A short warm-up first lets the broker make what it keeps: connections come and
go, and its request pool is filled to its size (a ``ThreadPoolExecutor`` keeps
every thread it makes, and makes one whenever a request arrives a moment
before a worker is idle again, so it grows towards its size under any steady
load). The figures of the idle broker after the warm-up are the starting level.
Afterwards: the same descriptors and threads, memory (RSS) within a generous
margin of it, no temporary file, no lock, the counter exact, and one audit
record per request the servers sent.

The soak lasts ``FSBROKER_SOAK_SECONDS`` seconds (60 by default; set it to 1800
for a long one: the test's own timeout grows with it, past the suite's 300 s).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.brokerproc import BrokerProcess
from tests.reliability.harness import app_http_server, temp_files

SOAK_SECONDS = float(os.environ.get("FSBROKER_SOAK_SECONDS", "60"))
WARM_UP_SECONDS = 5.0
STDIO_SERVERS = 3
#: Growth of the brokering process's RSS over the whole soak still taken as "its starting level".
RSS_MARGIN = 64 * 1024 * 1024


def run_round(broker: BrokerProcess, prefix: str, data: Path, url: str, seconds: float) -> dict[str, Any]:
    """Connect the servers, soak them all at once for *seconds*, close them; their results by name."""
    names = [f"{prefix}{i}" for i in range(STDIO_SERVERS + 1)]
    for name in names[:-1]:
        broker.connect(name)
    broker.connect(names[-1], url=url)
    calls = {}
    for i, name in enumerate(names):
        (data / name).mkdir()
        args = {"folder": f"data/{name}", "shared": "data/shared.txt", "seconds": seconds, "seed": i}
        calls[name] = broker.send("call", name=name, tool="soak", args=args, timeout=seconds + 300)
    results = {name: broker.wait(call, seconds + 320) for name, call in calls.items()}
    for name in names:
        broker.command("close", name=name)
    return results


def fd_targets(stats: dict[str, Any]) -> list[str]:
    """What the descriptors point to, without their numbers."""
    return sorted(entry.split(" -> ", 1)[1] for entry in stats["fds"])


@pytest.mark.slow
@pytest.mark.timeout(SOAK_SECONDS + 900)  # the warm-up, the soak, and each round's connecting and closing
def test_soak(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "shared.txt").write_text("0\n")
    with app_http_server() as http:
        broker = BrokerProcess(tmp_path, {"data": data}, allow=["data:read,write,delete,watch"], label="soak")
        try:
            warm = run_round(broker, "warm", data, http.url, WARM_UP_SECONDS)
            broker.command("fill_pool")
            start = broker.stats()
            started = time.monotonic()
            results = run_round(broker, "soak", data, http.url, SOAK_SECONDS)
            elapsed = time.monotonic() - started
            end = broker.stats()
        finally:
            broker.exit()

    for name, result in {**warm, **results}.items():
        assert result["unexpected"] == [], (name, result["unexpected"])
    # One audit record per request: the servers counted what they sent.
    for name, result in results.items():
        totals = end["audit"][name]
        assert totals["allowed"] + totals["denied"] == result["requests"], (name, totals, result["requests"])
    increments = sum(r["increments"] for r in [*warm.values(), *results.values()])
    assert (data / "shared.txt").read_text() == f"{increments}\n"
    assert temp_files(data) == []
    assert end["locks"] == [] and end["watches"] == 0 and end["connections"] == 0
    assert list((tmp_path / "locks").iterdir()) == []

    requests = sum(r["requests"] for r in results.values())
    ops: dict[str, int] = {}
    for result in results.values():
        for op, count in result["ops"].items():
            ops[op] = ops.get(op, 0) + count
    print(
        f"\nsoak: {len(results)} servers for {SOAK_SECONDS:g} s ({elapsed:.0f} s with connecting, closing), "
        f"{requests} requests ({requests / SOAK_SECONDS:.0f}/s), {increments} locked increments; ops {ops}\n"
        f"descriptors {len(start['fds'])} -> {len(end['fds'])}, threads {len(start['threads'])} -> "
        f"{len(end['threads'])}, RSS {start['rss'] / 2**20:.1f} -> {end['rss'] / 2**20:.1f} MiB"
    )
    assert fd_targets(end) == fd_targets(start)
    assert end["threads"] == start["threads"]
    assert end["rss"] - start["rss"] < RSS_MARGIN
