"""The one benchmark command: every row of the speed table, with its baselines, in one run.

``python benchmarks/run.py`` measures each row (see ``benchmarks/README.md``)
and the baselines it is compared with in the same invocation, prints the table
(medians of several runs, their spread, ratios, targets, met or not) with the
machine, the commit and the load average, and writes the figures as JSON
(``--json``, default ``benchmarks/results/latest.json``). ``--quick`` uses
smaller files and fewer repeats (2-3 minutes on 2 cores) and says so.
``--rows 1,2,9`` measures only some rows.

Every process it starts (workers, servers, kernels) is stopped on exit, also
on Ctrl-C; files live in a temporary folder removed at the end. The official
filesystem server is installed with npm into a cache folder (``--install-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's package, and tests/kernel/harness.py

import row_kernel_start  # noqa: E402
import row_listing  # noqa: E402
import row_media  # noqa: E402
import row_memory  # noqa: E402
import row_modern  # noqa: E402
import row_profile  # noqa: E402
import row_pydata  # noqa: E402
import row_responsiveness  # noqa: E402
import row_small_reads  # noqa: E402
import row_transfer  # noqa: E402
import row_watch  # noqa: E402
from compare_official import default_install_dir, node_version  # noqa: E402
from context import Bench, Settings, Skipped  # noqa: E402
from report import Row, describe_machine, markdown_of_run, render_table  # noqa: E402

#: One module per measurement (``row_*.py``), in the order of the table. Each has ``NUMBERS``
#: (the rows it fills) and ``measure(bench)``, which returns those rows judged against their
#: targets; a module fills two rows only where one measurement serves both (a shared baseline,
#: the same fresh kernels).
ROWS: tuple[ModuleType, ...] = (
    row_transfer,  # 1, 2
    row_media,  # 3
    row_small_reads,  # 4
    row_listing,  # 5
    row_kernel_start,  # 6, 7
    row_watch,  # 8
    row_memory,  # 9
    row_responsiveness,  # 10
    row_modern,  # 11
    row_pydata,  # 12, 13
    row_profile,  # 14
)

DEFAULT_JSON = HERE / "results" / "latest.json"


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(bench: Bench, wanted: set[int] | None) -> tuple[list[Row], list[dict[str, Any]]]:
    """Every row module whose rows are wanted; the rows, and for each module its load and seconds."""
    table: list[Row] = []
    runs: list[dict[str, Any]] = []
    for module in ROWS:
        numbers: tuple[int, ...] = module.NUMBERS
        if wanted is not None and not wanted.intersection(numbers):
            continue
        before, started = load(), time.perf_counter()
        try:
            measured: list[Row] = module.measure(bench)
        except Skipped as why:
            measured = [Row(number=n, what=module.__name__, value="skipped", note=str(why)) for n in numbers]
        except Exception as exc:
            traceback.print_exc()
            measured = [
                Row(number=n, what=module.__name__, value="failed", note=f"{type(exc).__name__}: {exc}")
                for n in numbers
            ]
        seconds = time.perf_counter() - started
        runs.append({"rows": list(numbers), "load_before": before, "load_after": load(), "seconds": seconds})
        table += measured
    return table, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller files, fewer repeats (2-3 minutes)")
    parser.add_argument("--repeats", type=int, help="runs behind each median (default 5, --quick 3)")
    parser.add_argument("--kernels", type=int, help="fresh kernels for rows 6 and 7 (default 5, --quick 1)")
    parser.add_argument("--rows", help="only these rows, e.g. 1,2,9")
    parser.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"figures as JSON (default {DEFAULT_JSON})"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="also print the table as Markdown (what report.py prints)"
    )
    parser.add_argument(
        "--install-dir", type=Path, default=default_install_dir(), help="npm prefix for the official server"
    )
    args = parser.parse_args()
    wanted = {int(n) for n in args.rows.split(",")} if args.rows else None
    settings = Settings.for_run(quick=args.quick, repeats=args.repeats, kernels=args.kernels)
    # Ctrl-C and SIGTERM raise KeyboardInterrupt wherever the run is. A handler of our own (not
    # Python's default one) also keeps asyncio.run from installing its own, which only cancels
    # its task and can lose the interrupt when that task finishes at the same moment.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)

    machine = describe_machine()
    machine["node"] = node_version()
    header = (
        f"jupyter_fsbroker benchmarks, {machine['date']}: {machine['cpus']} cores ({machine['cpu']}),"
        f" {machine['memory_gib']:.0f} GiB, Python {machine['python']}, mcp {machine['mcp']},"
        f" node {machine['node'] or '-'}; commit {machine['commit'][:10]}"
        + (" (with uncommitted changes)" if machine["dirty"] else "")
    )
    mode = "--quick: smaller sizes and fewer repeats" if settings.quick else "full run"
    start_load, started = load(), time.perf_counter()
    print(f"{header}\n{mode}; load average at start " + " / ".join(f"{x:.1f}" for x in start_load))
    sys.stdout.flush()

    bench = Bench(settings, install_dir=args.install_dir)
    try:
        table, runs = measure(bench, wanted)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        bench.close()
    seconds = time.perf_counter() - started
    end_load = load()

    print()
    print(render_table(table))
    print(
        f"\nvalue: median [min-max] of n runs (rows 8, 10: percentiles of n samples); {mode};"
        f" total {seconds:.0f} s; load average (1 min) {start_load[0]:.1f} at start, {end_load[0]:.1f} at end"
    )
    out = {
        "machine": machine,
        "settings": vars(settings) | {"rows": sorted(wanted) if wanted else "all"},
        "load_start": start_load,
        "load_end": end_load,
        "seconds": seconds,
        "runs": runs,
        "rows": [row.as_json() for row in table],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.markdown:  # what report.py prints from the JSON file: the READMEs' tables
        print()
        print(markdown_of_run(out))
        print()
    print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
