"""Rows 1 and 2: a large file streamed through the broker over Streamable HTTP and over stdio.

Ours: a server tool (``wire_server.py``'s ``hash_file``) reads the file with
the helper's ``iter_chunks`` (1 MiB chunks, 4 in flight) and hashes it; the
seconds are taken in that tool, where the bytes arrive.

Each transport is judged against the same bytes moved the plain way between
two processes with the same tools and the same concurrency, decoded and hashed
where they arrive (seconds taken there), and shown beside the raw bytes, its
ceiling:

* row 1, ``plain_http.py``: base64 (``pybase64``) JSON (``orjson``) chunks from
  a starlette app under uvicorn, 4 requests in flight on 4 keep-alive
  ``http.client`` connections, a thread each (faster here than ``httpx2``,
  threaded or one pooled asyncio client: ``plain_http.py --compare``); the
  ceiling is the file's raw bytes streamed by the same server in one response;
* row 2, ``plain_pipe.py``: a child process answering 4-in-flight requests
  with the same base64 JSON lines through a pipe; the ceiling is the raw bytes
  through the same pipe.

Each repetition runs all six one after the other (plain HTTP, ours over HTTP,
raw HTTP, plain pipe, ours over stdio, raw pipe), so load that comes and goes
touches them alike; every side keeps one process (and server) for all
repetitions, except the pipe baselines, which start a child per read (as
``plain_pipe.py`` does; not timed). A ratio is the median of the runs' ratios,
each to the baseline of the same repetition; so is the share of the ceiling.
"""

from __future__ import annotations

from typing import Any

import plain_http
import plain_pipe
from context import Bench
from report import Row, refusals_note, summarize
from stats import median

NUMBERS = (1, 2)
MiB = 1024 * 1024
CHUNK = 1 * MiB
IN_FLIGHT = 4
KINDS = ("http_plain", "http", "http_raw", "pipe_plain", "stdio", "pipe_raw")

NOTES = {
    1: (
        "baseline: plain HTTP, 4 requests in flight on 4 keep-alive http.client connections (a thread"
        " each), starlette + uvicorn answering 1 MiB chunks as base64 (pybase64) in JSON (orjson), decoded"
        " (orjson, pybase64) and hashed in the client; ceiling: the same server streaming the file's raw"
        " bytes in one response, read by http.client into a 1 MiB buffer and hashed"
    ),
    2: (
        "baseline: plain pipe, a child process answering 4-in-flight requests with base64 (pybase64) JSON"
        " (orjson) lines of 1 MiB chunks through 1 MiB pipes, decoded and hashed in the parent; ceiling:"
        " the file's raw bytes through the same pipe (sendfile), hashed"
    ),
}


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    file = bench.random_file(s.read_mib)
    job = {"tool": "hash_file", "args": {"path": file.name, "chunk_size": CHUNK, "concurrency": IN_FLIGHT}}
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}

    def record(kind: str, result: dict[str, Any]) -> None:
        if result["sha256"] != file.sha256 or result["bytes"] != file.size:
            raise RuntimeError(f"{kind}: the bytes read are not the file's")
        rates[kind].append(result["bytes"] / result["seconds"] / 1e6)
        results[kind].append(result)

    stdio = bench.stdio_worker()
    folder, name = file.path.parent, file.path.name
    with plain_http.serve(bench.root) as url, bench.runner.open("http") as http:
        for rep in range(s.repeats):
            bench.log(f"rows 1-2: {s.read_mib} MiB, run {rep + 1}/{s.repeats}")
            record("http_plain", plain_http.fetch(url, name, CHUNK, IN_FLIGHT))
            record("http", http.call(job))
            record("http_raw", plain_http.fetch_raw(url, name))
            record("pipe_plain", plain_pipe.fetch(folder, name, CHUNK, IN_FLIGHT))
            record("stdio", stdio.call(job))
            record("pipe_raw", plain_pipe.fetch_raw(folder, name))

    rows = []
    for number, kind, label, goal in ((1, "http", "Streamable HTTP", 1.5), (2, "stdio", "stdio", 3.0)):
        plain, raw = ("http_plain", "http_raw") if number == 1 else ("pipe_plain", "pipe_raw")
        # Each run's ratio to the baseline of the same repetition, then their median: load that
        # changes between runs changes both sides of a ratio alike.
        ratios = [ours / theirs for ours, theirs in zip(rates[kind], rates[plain], strict=True)]
        shares = [ours / top for ours, top in zip(rates[kind], rates[raw], strict=True)]
        ratio, share = median(ratios), median(shares)
        note = NOTES[number] + refusals_note(results[kind])
        rows.append(
            Row(
                number=number,
                what=f"{s.read_mib} MiB read over {label}, 1 MiB chunks, {IN_FLIGHT} in flight",
                value=summarize(rates[kind], "{:.1f}", "MB/s"),
                baseline=summarize(rates[plain], "{:.1f}", "MB/s")
                + (" plain HTTP" if number == 1 else " plain pipe"),
                ratio=f"{ratio:.2f}x",
                ceiling=summarize(rates[raw], "{:.0f}", "MB/s") + f" ({share:.0%})",
                target=f"≥ {goal:.1f}x",
                met=ratio >= goal,
                n=s.repeats,
                figures={
                    "mb_per_s": rates[kind],
                    "baseline_mb_per_s": rates[plain],
                    "ceiling_mb_per_s": rates[raw],
                    "ratios": ratios,
                    "ratio": ratio,
                    "ceiling_shares": shares,
                    "ceiling_share": share,
                    "ratio_of_medians": median(rates[kind]) / median(rates[plain]),
                    "refused": [r.get("refused", {}) for r in results[kind]],
                    "bytes": file.size,
                },
                note=note,
            )
        )
    return rows
