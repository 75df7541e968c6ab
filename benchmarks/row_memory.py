"""Row 9: how much the brokering process grows while a server reads a large file through it.

A fresh worker (a broker connected to ``wire_server.py`` over stdio) first
makes one small read (so that one-time imports, such as the JSON-schema
validation of the first tool result, are not counted), then resets its peak
RSS (``/proc/self/clear_refs``) and the server reads the large file with
``iter_chunks`` (1 MiB chunks, 4 in flight). The growth is the worker's peak
RSS (``VmHWM``) during that read minus its RSS just before it. Each repeat
uses a fresh worker.
"""

from __future__ import annotations

from context import Bench
from report import Row, summarize
from stats import median

NUMBERS = (9,)
MiB = 1024 * 1024
GOAL = 32.0


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    file = bench.random_file(s.rss_mib)
    bench.text_file("small100.txt", "x" * 99 + "\n")
    warmup = {"tool": "hash_file", "args": {"path": "data/small100.txt", "chunk_size": MiB, "concurrency": 4}}
    job = {"tool": "hash_file", "args": {"path": file.name, "chunk_size": MiB, "concurrency": 4}}
    repeats = 1 if s.quick else 3
    growth: list[float] = []
    rates: list[float] = []
    for rep in range(repeats):
        bench.log(f"row 9: {s.rss_mib} MiB through a fresh worker, run {rep + 1}/{repeats}")
        _, result = bench.runner.run("helper", [warmup, job])
        if result["sha256"] != file.sha256:
            raise RuntimeError("row 9: the bytes read are not the file's")
        if not result["client_peak_reset"]:
            raise RuntimeError("row 9: cannot reset the peak RSS here (/proc/self/clear_refs)")
        growth.append((result["client_peak_kib"] - result["client_rss_before_kib"]) / 1024)
        rates.append(result["bytes"] / result["seconds"] / 1e6)
    value = median(growth)
    return [
        Row(
            number=9,
            what=f"peak RSS growth of the brokering process, {s.rss_mib} MiB read",
            value=summarize(growth, "+{:.0f}", "MiB"),
            target=f"≤ {GOAL:.0f} MiB",
            met=value <= GOAL,
            n=repeats,
            figures={"growth_mib": growth, "mb_per_s": rates},
            note=f"over stdio, while reading at {median(rates):.0f} MB/s",
        )
    ]
