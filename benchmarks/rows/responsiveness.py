"""Row 10: how fast a kernel answers ``1+1`` while a server streams a large file through it.

A fresh kernel loads the extension, shares the benchmark's data folder with a
read grant, connects ``wire_server.py`` over stdio and calls one small read
(one-time imports out of the way). Then the benchmark sends ``1+1`` execute
requests one after another (10 ms apart) and times each from outside, from
sending the request to its ``execute_reply``: first with the kernel idle, then
while a thread in the kernel calls ``hash_file`` on the large file (the server
reads it with ``iter_chunks``, 1 MiB chunks, 4 in flight, through this
kernel's broker), until that call has returned. p95 of each set is reported.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from context import Bench
from kernels import kernel_in, timed_execute
from report import Row
from stats import percentile

NUMBERS = (10,)
MiB = 1024 * 1024
GOAL = 50.0
SPACING = 0.01
SERVER = str(Path(__file__).resolve().parents[1] / "wire_server.py")


def setup(root: str) -> str:
    return f"""
import json, os, sys, threading
import jupyter_fsbroker as fsb
broker = fsb.get_broker()
broker.add_root({root!r}, name="data")
broker.allow("data", ops=("read",))
bench = broker.connect("bench", command=[{sys.executable!r}, {SERVER!r}, "helper"])
_warm = bench.call_tool("hash_file", {{"path": "data/small100.txt", "chunk_size": {MiB}, "concurrency": 4}})
assert not _warm.is_error, _warm
"""


def stream(marker: str) -> str:
    return f"""
def _stream():
    result = bench.call_tool("hash_file", {{"path": "data/big.bin", "chunk_size": {MiB}, "concurrency": 4}})
    with open({marker!r} + ".tmp", "w") as out:
        json.dump({{"error": result.is_error, "data": result.data}}, out)
    os.replace({marker!r} + ".tmp", {marker!r})
threading.Thread(target=_stream, name="stream", daemon=True).start()
"""


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    _, digest = bench.random_file("big.bin", s.read_mib * MiB)
    bench.text_file("small100.txt", "x" * 99 + "\n")
    base = bench.scratch("kernel")
    marker = base / "streamed.json"
    (base / "work").mkdir()
    bench.log("row 10: a kernel with the extension and wire_server.py over stdio")
    with kernel_in(base / "home", base / "work") as kernel:
        timed_execute(kernel, "%load_ext jupyter_fsbroker")
        kernel.run(setup(str(bench.root)), timeout=120)
        bench.log(f"row 10: {s.probes} idle 1+1 round trips")
        idle = []
        for _ in range(s.probes):
            idle.append(timed_execute(kernel, "1+1") * 1000)
            time.sleep(SPACING)
        bench.log(f"row 10: 1+1 round trips while {s.read_mib} MiB stream through the kernel")
        timed_execute(kernel, stream(str(marker)))
        busy = []
        started = time.perf_counter()
        while not marker.exists():
            busy.append(timed_execute(kernel, "1+1") * 1000)
            time.sleep(SPACING)
        seconds = time.perf_counter() - started
        outcome = json.loads(marker.read_text())
    data = outcome["data"]
    if outcome["error"] or data["sha256"] != digest:
        raise RuntimeError(f"row 10: the stream through the kernel failed: {outcome}")
    if len(busy) < 5:
        raise RuntimeError(f"row 10: only {len(busy)} round trips during the stream; use a larger file")
    p95_idle, p95_busy = percentile(idle, 95), percentile(busy, 95)
    rate = data["bytes"] / data["seconds"] / 1e6
    return [
        Row(
            number=10,
            what=f"kernel 1+1 round trip p95 while {s.read_mib} MiB stream through it",
            value=f"{p95_busy:.0f} ms (idle {p95_idle:.0f} ms)",
            target=f"≤ {GOAL:.0f} ms",
            met=p95_busy <= GOAL,
            n=len(busy),
            figures={
                "busy_ms": busy,
                "idle_ms": idle,
                "p95_ms": p95_busy,
                "p95_idle_ms": p95_idle,
                "p50_ms": percentile(busy, 50),
                "p50_idle_ms": percentile(idle, 50),
                "stream_mb_per_s": rate,
                "stream_seconds": seconds,
            },
            note=(
                f"p50 {percentile(busy, 50):.0f} ms busy / {percentile(idle, 50):.0f} ms idle;"
                f" the stream ran at {rate:.0f} MB/s in a kernel thread (stdio server)"
            ),
        )
    ]
