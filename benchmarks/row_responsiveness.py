"""Row 10: how fast a kernel answers ``1+1`` while a server streams a large file through it.

A fresh kernel loads the extension, shares the benchmark's data folder with a
read grant and connects ``wire_server.py`` twice: over stdio, and over
Streamable HTTP (a server process started here). One small read on each
connection gets one-time imports out of the way. Then the benchmark sends
``1+1`` execute requests one after another (10 ms apart) and times each from
outside, from sending the request to its ``execute_reply``: first with the
kernel idle, then while a thread in the kernel calls ``hash_file`` on the large
file over one transport (the server reads it with ``iter_chunks``, 1 MiB
chunks, 4 in flight, through this kernel's broker), until that call returned
(the thread reads the file again until as many round trips were made as in
the idle set: a fast transport reads a small file quicker than that); then
the same over the other transport. The value is the worse p95 of the two.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench_wire import http_server
from context import Bench, DataFile
from kernels import Kernel, kernel_in, timed_execute
from report import Row
from stats import median, percentile

NUMBERS = (10,)
MiB = 1024 * 1024
GOAL = 50.0
SPACING = 0.01
SERVER = str(Path(__file__).resolve().parent / "wire_server.py")
READ = f'"chunk_size": {MiB}, "concurrency": 4'


def setup(root: str, url: str) -> str:
    return f"""
import json, os, threading
import jupyter_fsbroker as fsb
broker = fsb.get_broker()
broker.add_root({root!r}, name="data")
broker.allow("data", ops=("read",))
servers = {{
    "stdio": broker.connect("stdio", command=[{sys.executable!r}, {SERVER!r}, "helper"]),
    "http": broker.connect("http", url={url!r}, era="legacy"),  # the handshake era, as measured
}}
for _conn in servers.values():
    _warm = _conn.call_tool("hash_file", {{"path": "data/small100.txt", {READ}}})
    assert not _warm.is_error, _warm
"""


def stream(transport: str, name: str, marker: Path) -> str:
    """A cell that starts a thread reading the file over *transport*, again until ``marker.stop`` exists.

    The thread writes every read's outcome to *marker* when it ends.
    """
    stop, done = str(marker.with_suffix(".stop")), str(marker)
    return f"""
def _stream():
    outcomes = []
    while True:
        result = servers[{transport!r}].call_tool("hash_file", {{"path": {name!r}, {READ}}})
        outcomes.append({{"error": result.is_error, "data": result.data}})
        if result.is_error or os.path.exists({stop!r}):
            break
    with open({done!r} + ".tmp", "w") as out:
        json.dump(outcomes, out)
    os.replace({done!r} + ".tmp", {done!r})
threading.Thread(target=_stream, name="stream", daemon=True).start()
"""


def probe_while_streaming(
    kernel: Kernel, transport: str, file: DataFile, marker: Path, probes: int
) -> tuple[list[float], list[float]]:
    """``1+1`` round trips (ms) while the kernel streams the file over *transport*; the reads' MB/s.

    The file is read once, or again and again until at least *probes* round
    trips were made (a fast transport reads a small file in less time than
    that takes); every round trip until the last read ended counts.
    """
    timed_execute(kernel, stream(transport, file.name, marker))
    busy = []
    while not marker.exists():
        busy.append(timed_execute(kernel, "1+1") * 1000)
        if len(busy) == probes:
            marker.with_suffix(".stop").touch()
        time.sleep(SPACING)
    outcomes = json.loads(marker.read_text())
    for outcome in outcomes:
        if outcome["error"] or outcome["data"]["sha256"] != file.sha256:
            raise RuntimeError(f"row 10: the stream over {transport} failed: {outcome}")
    return busy, [o["data"]["bytes"] / o["data"]["seconds"] / 1e6 for o in outcomes]


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    file = bench.random_file(s.read_mib)
    bench.text_file("small100.txt", "x" * 99 + "\n")
    base = bench.scratch("kernel")
    (base / "work").mkdir()
    busy: dict[str, list[float]] = {}
    rates: dict[str, list[float]] = {}
    bench.log("row 10: a kernel with the extension, wire_server.py over stdio and over HTTP")
    with http_server() as url, kernel_in(base / "home", base / "work") as kernel:
        timed_execute(kernel, "%load_ext jupyter_fsbroker")
        kernel.run(setup(str(bench.root), url), timeout=120)
        bench.log(f"row 10: {s.probes} idle 1+1 round trips")
        idle = []
        for _ in range(s.probes):
            idle.append(timed_execute(kernel, "1+1") * 1000)
            time.sleep(SPACING)
        for transport in ("stdio", "http"):
            bench.log(
                f"row 10: 1+1 round trips while {s.read_mib} MiB stream through the kernel ({transport})"
            )
            busy[transport], rates[transport] = probe_while_streaming(
                kernel, transport, file, base / f"streamed-{transport}.json", s.probes
            )
    p95 = {t: percentile(v, 95) for t, v in busy.items()}
    p50 = {t: percentile(v, 50) for t, v in busy.items()}
    worst = max(p95.values())
    return [
        Row(
            number=10,
            what=f"kernel 1+1 round trip p95 while a thread in the kernel streams {s.read_mib} MiB",
            value=f"{worst:.0f} ms (idle {percentile(idle, 95):.0f} ms)",
            target=f"≤ {GOAL:.0f} ms",
            met=worst <= GOAL,
            n=min(len(v) for v in busy.values()),
            figures={
                "busy_ms": busy,
                "idle_ms": idle,
                "p95_ms": p95,
                "p50_ms": p50,
                "p95_idle_ms": percentile(idle, 95),
                "p50_idle_ms": percentile(idle, 50),
                "stream_mb_per_s": rates,
            },
            note=(
                "p95 / p50: "
                + ", ".join(
                    f"{t} {p95[t]:.0f} / {p50[t]:.0f} ms ({len(rates[t])} x {s.read_mib} MiB"
                    f" at {median(rates[t]):.0f} MB/s)"
                    for t in busy
                )
                + f", idle {percentile(idle, 95):.0f} / {percentile(idle, 50):.0f} ms"
                f"; the stream runs in a thread the benchmark starts in the kernel (not in a cell: the cells"
                f" are the 1+1 probes), again until {s.probes} round trips were made"
            ),
        )
    ]
