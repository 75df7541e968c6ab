"""Row 3: a binary file read through the broker over stdio, against the official server's best case.

What it compares is two ways of moving a binary file, each side's own: ours
streams it in chunks (``wire_server.py``'s ``hash_file``: ``iter_chunks``,
1 MiB chunks, 4 in flight; seconds taken in the server tool); the official
filesystem server (``compare_official.py``, npm, pinned version) has only
``read_media_file``, which returns the whole file as base64 in one message,
driven by the minimal pipe client (one ``readuntil`` per message; seconds
taken in that client). Both sides do one warm-up read that is not counted;
then the repetitions take turns (ours, theirs), so load that comes and goes
touches both alike, and the ratio is the median of each repetition's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from compare_official import PipeClient, timed_media_read
from context import Bench
from report import Row, refusals_note, summarize
from stats import median

NUMBERS = (3,)
MiB = 1024 * 1024
GOAL = 4.0


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    entry, version = bench.official_server()
    file = bench.random_file(s.media_mib)
    size = file.size
    job = {"tool": "hash_file", "args": {"path": file.name, "chunk_size": MiB, "concurrency": 4}}

    ours: list[float] = []
    official: list[float] = []
    stdio = bench.stdio_worker()
    expected = file.path.read_bytes()

    results: list[dict[str, Any]] = []

    def read_ours() -> float:
        result: dict[str, Any] = stdio.call(job)
        if result["sha256"] != file.sha256 or result["bytes"] != size:
            raise RuntimeError("row 3: the bytes read are not the file's")
        results.append(result)
        return float(result["seconds"])

    async def run() -> None:
        async with PipeClient(entry, bench.root) as client:
            read_ours()  # warm-ups, not counted
            await timed_media_read(client, file.path, expected)
            for rep in range(s.repeats):
                bench.log(f"row 3: {s.media_mib} MiB, ours then read_media_file, run {rep + 1}/{s.repeats}")
                ours.append(size / read_ours() / 1e6)  # the worker is driven synchronously
                official.append(size / await timed_media_read(client, file.path, expected) / 1e6)

    asyncio.run(run())
    ratios = [a / b for a, b in zip(ours, official, strict=True)]
    ratio = median(ratios)
    return [
        Row(
            number=3,
            what=(
                f"{s.media_mib} MiB binary read over stdio: chunked streaming (1 MiB chunks, 4 in flight)"
                " vs the official server's whole-file read_media_file"
            ),
            value=summarize(ours, "{:.1f}", "MB/s"),
            baseline=summarize(official, "{:.1f}", "MB/s") + " official, pipe client",
            ratio=f"{ratio:.2f}x",
            target=f"≥ {GOAL:.0f}x",
            met=ratio >= GOAL,
            n=s.repeats,
            figures={
                "mb_per_s": ours,
                "baseline_mb_per_s": official,
                "ratios": ratios,
                "ratio": ratio,
                "ratio_of_medians": median(ours) / median(official),
                "bytes": size,
            },
            note=f"baseline: server-filesystem {version}, minimal pipe client (its best case)"
            + refusals_note(results),
        )
    ]
