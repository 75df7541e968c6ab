"""Row 14: notebook 02's profile of its 300 MB CSV, end to end, through the example analysis server.

A real broker in this process shares the benchmark's folder and connects the
project's example analysis server, started as a user starts it: over
Streamable HTTP (``--http 127.0.0.1:0``, as notebook 02 does; row 14) and over
stdio (14a). The value is the time from ``tools/call profile_csv`` to its
result, as the notebook's cell waits for it (the connection is already open,
consent pre-approved). The baseline is the same profiler (the example
server's ``arrowstats.profile_arrow``) on the local file in this process, in
turn with the brokered calls in each repetition (memory-mapped, the fastest
way to hand Arrow a local file): what the broker adds to the same work. 14b
is the standard library's engine (``engine="python"``) over stdio, measured
once: what the profile cost before Arrow came to the example server.

The file has notebook 02's columns (order id, date, region, channel, product,
quantity, unit price, discount), ~300 MB (``--quick`` 32 MB).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from context import Bench, Skipped
from report import Row, summarize
from stats import median

NUMBERS = (14,)
MB = 1_000_000
SERVER = (sys.executable, "-m", "jupyter_fsbroker.examples.analysis_server")


def orders_file(bench: Bench, mb: int) -> Path:
    """``data/orders-<mb>MB.csv``: notebook 02's columns, random orders, about *mb* MB."""
    import numpy as np
    import pandas as pd

    path = bench.root / f"orders-{mb}MB.csv"
    if not path.exists():
        bench.log(f"writing {path.name}")
        rng = np.random.default_rng(2026)
        rows = 200_000
        dates = [f"2026-{m:02}-{d:02}" for m in range(1, 13) for d in range(1, 29)]
        products = ["espresso", "latte", "cappuccino", "tea", "cocoa", "croissant", "bagel", "muffin"]
        prices = np.array([2.50, 3.60, 3.40, 2.20, 3.10, 2.80, 2.90, 3.20])
        with open(path, "w", newline="") as out:
            out.write("order_id,date,region,channel,product,quantity,unit_price,discount\n")
            start = 1
            while out.tell() < mb * MB:
                product = rng.integers(0, len(products), rows)
                frame = pd.DataFrame(
                    {
                        "order_id": np.arange(start, start + rows),
                        "date": np.array(dates)[rng.integers(0, len(dates), rows)],
                        "region": rng.choice(["north", "south", "east", "west", "central"], rows),
                        "channel": rng.choice(["store", "online", "app"], rows),
                        "product": np.array(products)[product],
                        "quantity": rng.integers(1, 7, rows),
                        "unit_price": prices[product],
                        "discount": rng.choice([0.0, 0.0, 0.0, 0.1, 0.15], rows),
                    }
                )
                out.write(frame.to_csv(index=False, header=False, float_format="%.2f"))
                start += rows
    return path


def local_profile(path: Path) -> tuple[float, dict[str, Any]]:
    """Seconds and result of the example server's Arrow profiler on the local file, in this process."""
    import pyarrow as pa

    from jupyter_fsbroker.examples.arrowstats import profile_arrow

    def open_file(block: int) -> IO[bytes]:
        # Memory-mapped: of the ways to hand Arrow a local file (buffered, OSFile, mmap), the fastest.
        file: IO[bytes] = pa.memory_map(str(path))
        return file

    started = time.perf_counter()
    result, _ = profile_arrow(open_file)
    return time.perf_counter() - started, result


def http_server() -> tuple[subprocess.Popen[str], str]:
    """The example server over Streamable HTTP on a free port, and its URL (from its stderr)."""
    process = subprocess.Popen([*SERVER, "--http", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "listening on " in line:
            # The server logs each request on stderr: read it on, or a full pipe stops the server.
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, line.rsplit("listening on ", 1)[1].strip()
    process.kill()
    raise RuntimeError("the example server said nothing of where it listens")


def measure(bench: Bench) -> list[Row]:
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise Skipped(f"pandas and pyarrow are needed: {exc}") from None
    from jupyter_fsbroker.core import Broker, BrokerConfig
    from jupyter_fsbroker.core.consent import CallbackConsenter, ConsentDecision
    from jupyter_fsbroker.protocol import open_connection

    s = bench.settings
    mb = 32 if s.quick else 300
    csv = orders_file(bench, mb)
    size = csv.stat().st_size
    name = f"data/{csv.name}"
    seconds: dict[str, list[float]] = {"http": [], "stdio": [], "local": []}
    python: list[float] = []
    approve = CallbackConsenter(ConsentDecision.approve_all)

    async def call(conn: Any, engine: str = "auto") -> float:
        started = time.perf_counter()
        result = await conn.call_tool("profile_csv", {"path": name, "engine": engine}, timeout=3600)
        took = time.perf_counter() - started
        if result["isError"]:
            raise RuntimeError(f"row 14: profile_csv failed: {result['content']}")
        data = result["structuredContent"]
        if data["bytes"] != size or data["engine"] != engine.replace("auto", "arrow"):
            raise RuntimeError(f"row 14: the profile is not of the whole file by {engine}: {data['engine']}")
        return took

    async def run(url: str, state: Path) -> None:
        config = BrokerConfig(lock_dir=str(state / "locks"), trash_dir=str(state / "trash"))
        with Broker(config) as broker:
            broker.add_root(bench.root, name="data")
            async with (
                # The handshake era by name (the default would take the 2026-07-28 era over HTTP).
                open_connection(broker, "remote", url=url, consenter=approve, era="legacy") as http,
                open_connection(
                    broker, "local", command=SERVER[0], args=SERVER[1:], consenter=approve
                ) as stdio,
            ):
                await call(stdio)  # warm-ups, not counted: the server's first call imports pyarrow
                await call(http)
                local_profile(csv)
                for rep in range(s.repeats):
                    bench.log(f"row 14: {mb} MB profile, HTTP, stdio and local, run {rep + 1}/{s.repeats}")
                    seconds["http"].append(await call(http))
                    seconds["stdio"].append(await call(stdio))
                    seconds["local"].append(local_profile(csv)[0])
                bench.log(f"row 14b: {mb} MB profile by the standard library, once")
                python.append(await call(stdio, "python"))

    process, url = http_server()
    try:
        state = bench.tmp / "row14"
        state.mkdir(exist_ok=True)
        asyncio.run(run(url, state))
    finally:
        process.terminate()
        process.wait(timeout=30)
    return [
        _row("", "Streamable HTTP", seconds["http"], seconds["local"], size, mb),
        _row("a", "stdio", seconds["stdio"], seconds["local"], size, mb),
        Row(
            number=14,
            variant="b",
            what=f"the same {mb} MB profile by the standard library's engine over stdio",
            value=summarize(python, "{:.1f}", "s"),
            baseline=summarize(seconds["stdio"], "{:.2f}", "s") + " Arrow over stdio (14a)",
            ratio=f"{python[0] / median(seconds['stdio']):.1f}x",
            n=1,
            figures={"seconds": python, "mb_per_s": [size / t / MB for t in python]},
            note="engine='python': csv module in a worker thread, chunks read ahead; once per run",
        ),
    ]


def _row(variant: str, label: str, values: list[float], local: list[float], size: int, mb: int) -> Row:
    ratios: list[float] = [a / b for a, b in zip(values, local, strict=True)]
    rate: Callable[[float], float] = lambda t: size / t / MB  # noqa: E731
    return Row(
        number=14,
        variant=variant,
        what=f"notebook 02's profile_csv of a {mb} MB CSV, end to end, example server over {label}",
        value=summarize(values, "{:.2f}", "s"),
        baseline=summarize(local, "{:.2f}", "s") + " the same profiler on the local file",
        ratio=f"{median(ratios):.2f}x",
        n=len(values),
        figures={
            "seconds": values,
            "local_seconds": local,
            "ratios": ratios,
            "mb_per_s": [rate(t) for t in values],
            "bytes": size,
        },
        note=(
            f"{label}: tools/call to result, connection open, read pre-approved; the server's Arrow"
            f" profile over files(ctx).fsspec(); {median([rate(t) for t in values]):.0f} MB/s"
        ),
    )
