"""Row 4: sequential small reads, through the broker against the official server's ``read_text_file``.

Ours: ``wire_server.py``'s ``round_trips`` sends sequential ``files/read`` of a
100-byte file over stdio and takes the seconds in the server tool (the
server's view of one read). The official server answers ``read_text_file``
``tools/call`` requests from mcp's Python client, timed in that client (the
notebook's view). The ratio is ours / theirs in time: lower is better. For
reference, a full run also times the same calls from the minimal pipe client.
"""

from __future__ import annotations

import asyncio

from compare_official import mcp_text_reads, pipe_text_reads
from context import Bench
from report import Row, summarize
from stats import median

NUMBERS = (4,)
GOAL = 0.5


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    entry, version = bench.official_server()
    small = bench.text_file("small100.txt", "x" * 99 + "\n")
    count, reps = s.small_reads, s.repeats

    bench.log(f"row 4: {reps} x {count} files/read over stdio")
    job = {"tool": "round_trips", "args": {"path": "data/small100.txt", "count": count, "kind": "read"}}
    results = [bench.stdio_worker().call(job) for _ in range(reps)]
    ours = [r["seconds"] / count * 1e6 for r in results]

    bench.log(f"row 4: {reps} x {count} read_text_file (mcp's client)")
    official = [t / count * 1e6 for t in asyncio.run(mcp_text_reads(entry, bench.root, small, count, reps))]
    note = f"per read; baseline: server-filesystem {version} via mcp's Python client"
    piped: list[float] = []
    if not s.quick:  # for reference only: how much of the baseline is mcp's client
        bench.log(f"row 4: {reps} x {count} read_text_file (the pipe client)")
        piped = [t / count * 1e6 for t in asyncio.run(pipe_text_reads(entry, bench.root, small, count, reps))]
        note += f" (via the minimal pipe client: {median(piped):.0f} µs)"

    ratio = median(ours) / median(official)
    return [
        Row(
            number=4,
            what=f"{count} sequential 100-byte files/read vs official read_text_file",
            value=summarize(ours, "{:.0f}", "µs"),
            baseline=summarize(official, "{:.0f}", "µs"),
            ratio=f"{ratio:.2f}x",
            target=f"≤ {GOAL}x (time)",
            met=ratio <= GOAL,
            n=reps,
            figures={"us": ours, "baseline_us": official, "pipe_client_us": piped, "ratio": ratio},
            note=note,
        )
    ]
