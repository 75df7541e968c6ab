"""Rows 11 and 11a: the 2026-07-28 era's batches against the handshake era, over Streamable HTTP.

Row 11: the file of rows 1-2 streamed by ``wire_server.py``'s ``hash_file`` (1 MiB chunks, 4 in
flight, timed in the tool) through a real broker, on the handshake era (a stateful server: each
chunk a ``files/read`` request the server sends, row 1's path) and on the 2026-07-28 era (a
stateless server: the reads come in batches of at most 2 MiB, a ``tools/call`` continuation a
round, the call kept live in the server between rounds). The ratio is modern / legacy throughput,
each run against the legacy run of the same repetition.

Row 11a: a small read's round trip on each era (``round_trips`` of one 100-byte file, sequential
reads timed in the tool): on the modern era each read is one round, so this is what a round
costs with nothing in it.

What a round costs while streaming: the modern call's seconds over its rounds (the batches the
client performed, counted in the worker), and the content each round carries.

Each repetition runs legacy then modern, so load that comes and goes touches both alike; each
side keeps one worker and one server for all repetitions.
"""

from __future__ import annotations

from typing import Any

from context import Bench
from report import Row, summarize
from stats import median

NUMBERS = (11,)
MiB = 1024 * 1024
CHUNK = 1 * MiB
IN_FLIGHT = 4
GOAL = 0.5


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    file = bench.random_file(s.read_mib)
    stream = {"tool": "hash_file", "args": {"path": file.name, "chunk_size": CHUNK, "concurrency": IN_FLIGHT}}
    small = bench.text_file("small100.txt", "x" * 99 + "\n")
    count = max(50, s.small_reads // 5)
    trips = {"tool": "round_trips", "args": {"path": f"data/{small.name}", "count": count, "kind": "read"}}
    warm = {"tool": "round_trips", "args": {"path": f"data/{small.name}", "count": 20, "kind": "read"}}
    rates: dict[str, list[float]] = {"http": [], "modern": []}
    per_read: dict[str, list[float]] = {"http": [], "modern": []}
    rounds: list[dict[str, Any]] = []
    seconds: list[float] = []

    def streamed(kind: str, result: dict[str, Any]) -> None:
        if result["sha256"] != file.sha256 or result["bytes"] != file.size:
            raise RuntimeError(f"{kind}: the bytes read are not the file's")
        rates[kind].append(result["bytes"] / result["seconds"] / 1e6)
        if kind == "modern":
            rounds.append(result["client_rounds"])
            seconds.append(result["seconds"])

    with bench.runner.open("http") as legacy, bench.runner.open("modern") as modern:
        workers = {"http": legacy, "modern": modern}
        for worker in workers.values():
            worker.call(warm)
        for rep in range(s.repeats):
            bench.log(f"row 11: {s.read_mib} MiB on each era, {count} small reads, run {rep + 1}/{s.repeats}")
            for kind, worker in workers.items():
                streamed(kind, worker.call(stream))
            for kind, worker in workers.items():
                per_read[kind].append(worker.call(trips)["seconds"] / count * 1e3)

    ratios = [ours / theirs for ours, theirs in zip(rates["modern"], rates["http"], strict=True)]
    ratio = median(ratios)
    round_ms = [t / r["rounds"] * 1e3 for t, r in zip(seconds, rounds, strict=True)]
    round_bytes = file.size / median([r["rounds"] for r in rounds])
    ops = median([r["operations"] / r["rounds"] for r in rounds])
    read_ratio = median([m / h for m, h in zip(per_read["modern"], per_read["http"], strict=True)])
    note = (
        f"modern: a stateless server, the call kept live between rounds; a streaming round took"
        f" {median(round_ms):.1f} ms for {round_bytes / MiB:.2f} MiB of content ({ops:.1f} reads,"
        f" {round_bytes * 4 / 3 / MiB:.2f} MiB of base64 in the continuation request), a small read's"
        f" round {median(per_read['modern']):.2f} ms against {median(per_read['http']):.2f} ms for a"
        f" legacy files/read ({read_ratio:.2f}x)"
    )
    return [
        Row(
            number=11,
            what=f"{s.read_mib} MiB read on the 2026-07-28 era (batches), vs the handshake era, HTTP",
            value=summarize(rates["modern"], "{:.1f}", "MB/s"),
            baseline=summarize(rates["http"], "{:.1f}", "MB/s") + " handshake era",
            ratio=f"{ratio:.2f}x",
            ceiling="",
            target=f"≥ {GOAL:.1f}x",
            met=ratio >= GOAL,
            n=s.repeats,
            figures={
                "mb_per_s": rates["modern"],
                "baseline_mb_per_s": rates["http"],
                "ratios": ratios,
                "ratio": ratio,
                "rounds": rounds,
                "round_ms": round_ms,
                "round_content_bytes": round_bytes,
                "bytes": file.size,
            },
            note=note,
        ),
        Row(
            number=11,
            variant="a",
            what=f"a small read's round trip, {count} sequential, 2026-07-28 era vs handshake era",
            value=summarize(per_read["modern"], "{:.2f}", "ms"),
            baseline=summarize(per_read["http"], "{:.2f}", "ms") + " handshake era",
            ratio=f"{read_ratio:.2f}x",
            ceiling="",
            target="",
            met=None,
            n=s.repeats,
            figures={"ms_modern": per_read["modern"], "ms_legacy": per_read["http"], "ratio": read_ratio},
            note="",
        ),
    ]
