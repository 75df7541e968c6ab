"""Row 4 and its variants: sequential small reads through the broker, against the official server's best case.

Ours: ``wire_server.py``'s ``round_trips`` sends sequential ``files/read`` of a
100-byte file over stdio and takes the seconds in the server tool (the
server's view of one read). The baseline is the official filesystem server
answering ``read_text_file`` ``tools/call`` requests of the same file from
``compare_official.py``'s minimal pipe client (one JSON line out, one
``readuntil`` back: its fastest client here), timed in that client. The ratio
is ours / theirs in time: lower is better.

Variants, judged against the same kind of baseline:

* **4a**: our server side on mcp's stock stdio transport and sessions
  (``wire_server.py stock``: ``MCPServer.run("stdio")``), what a server that
  does not serve stdio with the helper gets;
* **4b**: 1000 different files instead of one (``read_each``): every path is
  new to the connection, each file is opened once; the official server reads
  another 1000 as new to it, so no side reads a file the other read.

Each repetition runs ours, then the stock variant, then the official server,
then both sides' different files, so load that comes and goes touches them
alike. Every side makes one uncounted warm-up call first (the client's
one-time imports on its first tool result stall the first calls). A full run
also times the official server from mcp's Python client, for reference.
"""

from __future__ import annotations

import asyncio
from typing import Any

from compare_official import PipeClient, mcp_text_reads, timed_text_reads
from context import Bench
from report import Row, refusals_note, summarize
from stats import median

NUMBERS = (4,)
GOAL = 0.5


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    entry, version = bench.official_server()
    small = bench.text_file("small100.txt", "x" * 99 + "\n")
    count, reps = s.small_reads, s.repeats
    ours_many = [bench.small_files(f"many-ours-{rep}", count) for rep in range(reps)]
    theirs_many = [bench.small_files(f"many-official-{rep}", count) for rep in range(reps)]
    job = {"tool": "round_trips", "args": {"path": "data/small100.txt", "count": count, "kind": "read"}}
    warm = {"tool": "round_trips", "args": {"path": "data/small100.txt", "count": 50, "kind": "read"}}
    results: dict[str, list[dict[str, Any]]] = {"ours": [], "stock": [], "many": []}
    official: dict[str, list[float]] = {"one": [], "many": []}
    helper = bench.stdio_worker()

    async def run(stock: Any) -> None:
        async with PipeClient(entry, bench.root) as client:
            await timed_text_reads(client, [small] * 50)  # warm-up
            for rep in range(reps):
                bench.log(f"row 4: {count} reads of one file and of {count} files, run {rep + 1}/{reps}")
                # The workers are driven synchronously: the pipe client waits meanwhile.
                results["ours"].append(helper.call(job))
                results["stock"].append(stock.call(job))
                official["one"].append(await timed_text_reads(client, [small] * count))
                folder = f"data/{ours_many[rep].name}"
                results["many"].append(
                    helper.call({"tool": "read_each", "args": {"folder": folder, "count": count}})
                )
                paths = [theirs_many[rep] / f"f{index:04d}.txt" for index in range(count)]
                official["many"].append(await timed_text_reads(client, paths))

    with bench.runner.open("stock", ops=("read",)) as stock:
        helper.call(warm)
        stock.call(warm)
        asyncio.run(run(stock))

    def per_read(values: list[dict[str, Any]]) -> list[float]:
        return [r["seconds"] / r["count"] * 1e6 for r in values]

    ours, stocked, many = per_read(results["ours"]), per_read(results["stock"]), per_read(results["many"])
    one_us = [t / count * 1e6 for t in official["one"]]
    many_us = [t / count * 1e6 for t in official["many"]]
    via_mcp: list[float] = []
    note = f"per read; baseline: server-filesystem {version}, read_text_file from the minimal pipe client"
    if not s.quick:  # for reference only: the official server as mcp's Python client sees it
        bench.log(f"row 4: {reps} x {count} read_text_file (mcp's client)")
        seconds = asyncio.run(mcp_text_reads(entry, bench.root, small, count, reps))
        via_mcp = [t / count * 1e6 for t in seconds]
        note += f" (from mcp's Python client: {median(via_mcp):.0f} µs)"

    def row(variant: str, what: str, values: list[float], base: list[float], extra: str) -> Row:
        # Each run's ratio to the official server's run of the same repetition, then their median.
        ratios = [a / b for a, b in zip(values, base, strict=True)]
        ratio = median(ratios)
        return Row(
            number=4,
            variant=variant,
            what=what,
            value=summarize(values, "{:.0f}", "µs"),
            baseline=summarize(base, "{:.0f}", "µs") + " official, pipe client",
            ratio=f"{ratio:.2f}x",
            target=f"≤ {GOAL}x (time)",
            met=ratio <= GOAL,
            n=reps,
            figures={"us": values, "baseline_us": base, "ratios": ratios, "ratio": ratio, "mcp_us": via_mcp},
            note=extra,
        )

    return [
        row(
            "",
            f"{count} sequential 100-byte files/read vs official read_text_file",
            ours,
            one_us,
            note + refusals_note(results["ours"]),
        ),
        row(
            "a",
            "the same, our server on mcp's stock stdio sessions",
            stocked,
            one_us,
            'wire_server.py stock: MCPServer.run("stdio"), requests through mcp\'s ServerSession'
            + refusals_note(results["stock"]),
        ),
        row(
            "b",
            f"{count} different 100-byte files, one read each",
            many,
            many_us,
            f"each path new to its side: {count} files read by the broker, {count} others by the official"
            " server, in every run" + refusals_note(results["many"]),
        ),
    ]
