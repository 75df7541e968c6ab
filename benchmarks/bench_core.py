"""Core broker throughput and latency, without any transport.

Run ``python benchmarks/bench_core.py``. It measures what the broker itself
costs per request (resolution, grant checks, locks, I/O, audit), which bounds
what any transport can reach. Numbers go to stdout as a table.

The broker runs with the user's default settings, limits included: a request
the rate limiter refuses is repeated after its ``retryAfterMs``, as the server
helper does, and the time includes the wait; a line whose requests were
refused says how many.
"""

from __future__ import annotations

import base64
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_fsbroker.core.broker import Broker
from jupyter_fsbroker.core.config import BrokerConfig
from jupyter_fsbroker.core.connection import Connection
from jupyter_fsbroker.core.errors import RateLimited

MiB = 1024 * 1024


def timed(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of *repeat* runs of *fn*, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


class Handle:
    """``Connection.handle`` as a server meets it: RATE_LIMITED waits ``retryAfterMs``, then repeats.

    ``refused`` counts the refusals, so that a line can say when the limits bound it.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.refused = 0

    def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        while True:
            try:
                return self.conn.handle(method, params)
            except RateLimited as exc:
                self.refused += 1
                time.sleep(exc.data.get("retryAfterMs", 1) / 1000)


def read_all(handle: Handle, path: str, encoding: str, chunk: int) -> int:
    offset, total = 0, 0
    while True:
        r = handle("files/read", {"path": path, "encoding": encoding, "offset": offset, "length": chunk})
        total += r["bytesRead"]
        offset += r["bytesRead"]
        if r["eof"]:
            return total


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        data = base / "data"
        deep = data.joinpath(*[f"level{i}" for i in range(10)])
        deep.mkdir(parents=True)
        (data / "big.bin").write_bytes(os.urandom(64 * MiB))
        (data / "big.txt").write_text(("naïve café, 数据 🚀 " * 4096 + "\n") * 600)
        (data / "small.txt").write_text("x" * 96)
        (deep / "leaf.txt").write_text("leaf")
        many = data / "many"
        many.mkdir()
        for i in range(10_000):
            (many / f"f{i:05d}.csv").write_text("1")
        # The user's defaults, except where state goes: out of the user's folders.
        config = BrokerConfig(lock_dir=str(base / "locks"), trash_dir=str(base / "trash"))
        with Broker(config) as broker:
            broker.add_root(data, name="data")
            broker.allow("data", ops=("read", "write", "delete", "watch"))
            handle = Handle(broker.connect("bench"))
            rows: list[tuple[str, str]] = []
            seen = 0

            def add(name: str, value: str) -> None:
                nonlocal seen
                if handle.refused > seen:
                    value += f"  ({handle.refused - seen} requests refused by the default limits, waited out)"
                    seen = handle.refused
                rows.append((name, value))

            t = timed(lambda: read_all(handle, "data/big.bin", "base64", MiB))
            add("read 64 MiB, 1 MiB base64 chunks", f"{64 / t:8.1f} MiB/s")
            t = timed(lambda: read_all(handle, "data/big.bin", "base64", 2 * MiB))
            add("read 64 MiB, 2 MiB base64 chunks", f"{64 / t:8.1f} MiB/s")
            size = (data / "big.txt").stat().st_size / MiB
            t = timed(lambda: read_all(handle, "data/big.txt", "utf-8", MiB))
            add(f"read {size:.0f} MiB UTF-8 text, 1 MiB chunks", f"{size / t:8.1f} MiB/s")

            def small_reads() -> None:
                for _ in range(1000):
                    handle("files/read", {"path": "data/small.txt"})

            t = timed(small_reads)
            add("1000 reads of a 96-byte file", f"{t * 1000:8.1f} µs/op")

            deep_path = "data/" + "/".join(f"level{i}" for i in range(10)) + "/leaf.txt"

            def deep_stats() -> None:
                for _ in range(1000):
                    handle("files/stat", {"path": deep_path})

            t = timed(deep_stats)
            add("1000 stats 11 components deep", f"{t * 1000:8.1f} µs/op")

            def small_writes() -> None:
                for i in range(200):
                    handle("files/write", {"path": "data/out.txt", "content": str(i)})

            t = timed(small_writes)
            add("200 atomic writes (fsync each)", f"{t / 200 * 1e6:8.1f} µs/op")

            payload = base64.b64encode(os.urandom(2 * MiB)).decode()

            def chunked_upload() -> None:
                for i in range(16):
                    params = {
                        "path": "data/up.bin",
                        "content": payload,
                        "encoding": "base64",
                        "offset": i * 2 * MiB,
                    }
                    if i == 15:
                        params["final"] = True
                    handle("files/write", params)

            t = timed(chunked_upload)
            add("upload 32 MiB in 2 MiB chunks", f"{32 / t:8.1f} MiB/s")

            def list_many() -> None:
                cursor = None
                while True:
                    params: dict[str, object] = {"path": "data/many", "maxEntries": 5000}
                    if cursor:
                        params["cursor"] = cursor
                    r = handle("files/list", params)
                    cursor = r.get("nextCursor")
                    if not cursor:
                        return

            t = timed(list_many)
            add("list 10,000 entries (2 pages)", f"{t * 1000:8.1f} ms")

            tracemalloc.start()
            read_all(handle, "data/big.bin", "base64", 2 * MiB)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            add("peak Python allocations, 64 MiB read", f"{peak / MiB:8.1f} MiB")

            latencies = []
            for _ in range(2000):
                start = time.perf_counter()
                handle("files/stat", {"path": "data/small.txt"})
                latencies.append(time.perf_counter() - start)
            latencies.sort()
            add(
                "stat latency p50 / p99",
                f"{statistics.median(latencies) * 1e6:.0f} / {latencies[1980] * 1e6:.0f} µs",
            )

    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
