"""Rows 1 and 2: a large file streamed through the broker over Streamable HTTP and over stdio.

A server tool (``wire_server.py``'s ``hash_file``) reads the file with the
helper's ``iter_chunks`` (1 MiB chunks, 4 in flight) and hashes it; the
seconds are taken in that tool, where the bytes arrive. The baseline is
``plain_http.py``: the same bytes as base64-JSON chunks from a tiny starlette
app under uvicorn, fetched sequentially with one keep-alive httpx2 client,
decoded and hashed where they arrive. Each repetition runs the three
one after the other (baseline, HTTP, stdio), so load that comes and goes
touches all three alike; each transport keeps one worker and one server for
all repetitions (over stdio the bench's shared one). The ratio is the median
of the runs' ratios, each to the baseline run just before it.
"""

from __future__ import annotations

from typing import Any

import plain_http
from context import Bench
from report import Row, summarize
from stats import median

NUMBERS = (1, 2)
MiB = 1024 * 1024
CHUNK = 1 * MiB
IN_FLIGHT = 4


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    file = bench.random_file(s.read_mib)
    job = {"tool": "hash_file", "args": {"path": file.name, "chunk_size": CHUNK, "concurrency": IN_FLIGHT}}
    rates: dict[str, list[float]] = {"baseline": [], "http": [], "stdio": []}

    def record(kind: str, result: dict[str, Any]) -> None:
        if result["sha256"] != file.sha256 or result["bytes"] != file.size:
            raise RuntimeError(f"{kind}: the bytes read are not the file's")
        rates[kind].append(result["bytes"] / result["seconds"] / 1e6)

    stdio = bench.stdio_worker()
    with plain_http.serve(bench.root) as url, bench.runner.open("http") as http:
        for rep in range(s.repeats):
            bench.log(f"rows 1-2: {s.read_mib} MiB, run {rep + 1}/{s.repeats}")
            record("baseline", plain_http.fetch(url, file.path.name, CHUNK))
            record("http", http.call(job))
            record("stdio", stdio.call(job))

    base = median(rates["baseline"])
    baseline_text = summarize(rates["baseline"], "{:.1f}", "MB/s")
    rows = []
    for number, kind, label, goal in ((1, "http", "Streamable HTTP", 1.5), (2, "stdio", "stdio", 3.0)):
        # Each run's ratio to the baseline run just before it, then their median: load that
        # changes between runs changes both sides of a ratio alike.
        ratios = [ours / theirs for ours, theirs in zip(rates[kind], rates["baseline"], strict=True)]
        ratio = median(ratios)
        rows.append(
            Row(
                number=number,
                what=f"{s.read_mib} MiB read over {label}, 1 MiB chunks, {IN_FLIGHT} in flight",
                value=summarize(rates[kind], "{:.1f}", "MB/s"),
                baseline=baseline_text,
                ratio=f"{ratio:.2f}x",
                target=f"≥ {goal:.1f}x",
                met=ratio >= goal,
                n=s.repeats,
                figures={
                    "mb_per_s": rates[kind],
                    "baseline_mb_per_s": rates["baseline"],
                    "ratios": ratios,
                    "ratio": ratio,
                    "ratio_of_medians": median(rates[kind]) / base,
                    "bytes": file.size,
                },
                note=(
                    "baseline: plain HTTP (starlette + uvicorn, base64-JSON 1 MiB chunks, httpx2, sequential)"
                    if number == 1
                    else ""
                ),
            )
        )
    return rows
