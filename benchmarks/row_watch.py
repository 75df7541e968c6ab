"""Row 8: watch latency, from a write on disk to the server holding ``notifications/files/changed``.

``wire_server.py``'s ``watch_latency`` watches a folder through the broker
(stdio), writes a file in it on disk (putting the write's ``time.time()`` in
it), and takes the time from just before the write to the notification's
arrival, in the server process, for each of many writes. Writes are spaced
further apart than the broker's coalescing window so that each is reported on
its own; p50 and p99 are over all writes of the run.

* **8**: the same existing file rewritten each time. The first change of a
  quiet file is delivered at once.
* **8a**: a new file created by each write (``new-0000.txt`` ...). The broker
  holds a created file for its coalescing window (``BrokerConfig.coalesce``,
  50 ms by default), so that the server hears of it once, written; its
  latency is that window and what follows it.
"""

from __future__ import annotations

from typing import Any

from context import Bench
from report import Row
from stats import percentile

NUMBERS = (8,)
GAP = 0.1  # seconds between a notification and the next write
P50_GOAL, P99_GOAL = 30.0, 100.0


def measure(bench: Bench) -> list[Row]:
    s = bench.settings
    (bench.root / "watched").mkdir(exist_ok=True)
    target = bench.text_file("watched/target.txt", "0\n")
    args: dict[str, Any] = {
        "path": "data/watched/target.txt",
        "disk_path": str(target),
        "count": s.watch_events,
        "gap": GAP,
    }
    rows = []
    for variant, new_files, what in (
        ("", False, "watch latency p50 / p99, rewrite of a file → server notified"),
        ("a", True, "watch latency p50 / p99, new file → server notified"),
    ):
        kind = "new files" if new_files else "rewrites"
        bench.log(f"row 8{variant}: {s.watch_events} {kind}, each awaited as a notification")
        result = bench.stdio_worker().call({"tool": "watch_latency", "args": args | {"new_files": new_files}})
        latencies = [t * 1000 for t in result["latencies"]]
        if not latencies:
            rows.append(Row(number=8, variant=variant, what=what, value="no event arrived", met=False))
            continue
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        missed = result["missed"]
        note = (
            "the first change of a quiet file is delivered at once"
            if not new_files
            else "a created file is held for the coalescing window (50 ms by default) before it is reported"
        )
        if missed:
            note += f"; {missed} of {s.watch_events} writes not reported within 5 s"
        rows.append(
            Row(
                number=8,
                variant=variant,
                what=what,
                value=f"{p50:.0f} / {p99:.0f} ms",
                target=f"≤ {P50_GOAL:.0f} / {P99_GOAL:.0f} ms",
                met=p50 <= P50_GOAL and p99 <= P99_GOAL and missed == 0,
                n=len(latencies),
                figures={"latencies_ms": latencies, "p50_ms": p50, "p99_ms": p99, "missed": missed},
                note=note,
            )
        )
    return rows
