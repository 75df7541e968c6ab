"""Row 3: a binary file read through the broker over stdio, against the official server's best case.

Ours: ``wire_server.py``'s ``hash_file`` (``iter_chunks``, 1 MiB chunks, 4 in
flight; seconds taken in the server tool). The official filesystem server
(``compare_official.py``, npm, pinned version) reads the same file with
``read_media_file``, driven by the minimal pipe client (one ``readuntil`` per
message; seconds taken in that client). Both sides do one warm-up read that
is not counted, then the repeats (ours in the bench's shared stdio worker).
"""

from __future__ import annotations

import asyncio
from typing import Any

from compare_official import pipe_media_reads
from context import Bench
from report import Row, summarize
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

    bench.log(f"row 3: {s.media_mib} MiB through the broker over stdio")
    ours: list[float] = []
    stdio = bench.stdio_worker()
    for index in range(s.repeats + 1):
        result: dict[str, Any] = stdio.call(job)
        if result["sha256"] != file.sha256 or result["bytes"] != size:
            raise RuntimeError("row 3: the bytes read are not the file's")
        if index:
            ours.append(size / result["seconds"] / 1e6)

    bench.log(f"row 3: {s.media_mib} MiB with the official server's read_media_file")
    seconds = asyncio.run(pipe_media_reads(entry, bench.root, file.path, s.repeats + 1))[1:]
    official = [size / t / 1e6 for t in seconds]

    ratio = median(ours) / median(official)
    return [
        Row(
            number=3,
            what=f"{s.media_mib} MiB binary read over stdio vs official read_media_file",
            value=summarize(ours, "{:.1f}", "MB/s"),
            baseline=summarize(official, "{:.1f}", "MB/s"),
            ratio=f"{ratio:.2f}x",
            target=f"≥ {GOAL:.0f}x",
            met=ratio >= GOAL,
            n=s.repeats,
            figures={"mb_per_s": ours, "baseline_mb_per_s": official, "ratio": ratio, "bytes": size},
            note=f"baseline: server-filesystem {version}, minimal pipe client (its best case)",
        )
    ]
