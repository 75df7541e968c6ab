"""A server floods the broker: peak memory of the brokering process, with and without a memory budget.

Run ``python benchmarks/bench_flood.py`` (about a minute and a half; ``--quick``: one run).
``--json FILE`` also writes the measurements.

The server is ``tests/reliability/servers/flood.py``: it writes, without
waiting for answers, 300 ``files/read`` of a 2 MiB file asking for a huge
length, interleaved with 3000 ``files/stat``, and counts the answers. The
client is this process: a real ``Broker`` with the default limits (its rate
limits refuse part of a flood: the outcomes say how many) and
:func:`jupyter_fsbroker.protocol.connect` over stdio. Each run happens in a
fresh process whose peak RSS (VmHWM) is reset right before the flood; the
figure is the peak minus the RSS before. Runs are made with the default budget
(32 MiB), a small one (8 MiB), and with glibc limited to one malloc arena
(``MALLOC_ARENA_MAX=1``), which shows how much of the peak is memory the
worker threads' arenas keep after it was freed, and with a budget too large to
bind (1 TiB), which shows what the budget prevents.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from procmem import memory_kib, reset_peak

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    sys.path.insert(0, str(HERE.parent))  # import this checkout

FLOOD = str(HERE.parent / "tests" / "reliability" / "servers" / "flood.py")
MiB = 1024 * 1024


async def flood_once(folder: str, budget: int) -> dict[str, Any]:
    from jupyter_fsbroker.core.broker import Broker
    from jupyter_fsbroker.core.config import BrokerConfig
    from jupyter_fsbroker.core.limits import Limits
    from jupyter_fsbroker.protocol import connect

    # The default limits but for the memory budget, the one setting this script varies.
    limits = Limits().replace(memory_budget=budget)
    config = BrokerConfig(lock_dir=f"{folder}/locks", trash_dir=f"{folder}/trash", limits=limits)
    with Broker(config) as broker:
        broker.add_root(f"{folder}/data", name="data")
        broker.allow("data", ops=("read",))
        conn = await connect(broker, "flood", command=sys.executable, args=[FLOOD])
        try:
            if not reset_peak():
                raise RuntimeError("the peak RSS cannot be reset here (/proc/self/clear_refs)")
            before = memory_kib()["rss_kib"]
            arguments = {
                "big": 300,
                "small": 3000,
                "big_path": "data/big.bin",
                "small_path": "data/small.txt",
                "length": 10**12,
            }
            result = await conn.call_tool("flood", arguments, timeout=600)
            peak = memory_kib()["peak_kib"]
        finally:
            await conn.aclose()
    report = json.loads(result["content"][0]["text"])
    report["growth_mib"] = (peak - before) / 1024
    return report


def run(folder: str, budget: int, arenas: int | None) -> dict[str, Any]:
    env = dict(os.environ)
    if arenas is not None:
        env["MALLOC_ARENA_MAX"] = str(arenas)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps({"folder": folder, "budget": budget})],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run per configuration")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements to FILE as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        spec = json.loads(args.worker)
        print(json.dumps(asyncio.run(flood_once(spec["folder"], spec["budget"]))))
        return
    runs = 1 if args.quick else 3
    configurations = [
        ("32 MiB (default)", 32 * MiB, None),
        ("8 MiB", 8 * MiB, None),
        ("32 MiB, 1 arena", 32 * MiB, 1),
        # What the budget prevents: answers queue without limit behind the single writer.
        ("none (1 TiB)", 1 << 40, None),
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fsbroker-bench-flood-") as folder:
        Path(folder, "data").mkdir()
        Path(folder, "data", "big.bin").write_bytes(os.urandom(2 * MiB))
        Path(folder, "data", "small.txt").write_text("small\n")
        for label, budget, arenas in configurations:
            reports = [run(folder, budget, arenas) for _ in range(runs)]
            growth = statistics.median(r["growth_mib"] for r in reports)
            last = reports[-1]
            rows.append({"budget": label, "growth_mib": growth, "reports": reports})
            print(
                f"{label:18s} peak RSS growth {growth:6.0f} MiB (median of {runs}); "
                f"{last['answered']}/{last['requests']} answered, outcomes {last['outcomes']}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
